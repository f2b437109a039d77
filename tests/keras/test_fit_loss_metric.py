"""Losses and metrics in ``fit``/``evaluate`` and a custom loop give TensorFlow 2.21's numbers, on one
device and under a MirroredStrategy over 2 logical CPUs.

``_fit_loss_metric_program.py`` runs each case once per framework (compiled metric names 'acc' and
'accuracy' resolved by the loss and shapes, threshold metrics, a Loss's 'sum' reduction, ``ignore_class``
over sequences, per-timestep weights, ``compute_average_loss`` with ``reduction='none'``, EarlyStopping
on a missing metric, ``class_weight`` with ``sample_weight``). TensorFlow's observations were recorded
once (``/work/tfvenv/bin/python tests/keras/_fit_loss_metric_program.py tf > tests/keras/
tf_2.21_fit_loss_metric.json``). Where TF's 2-replica numbers differ from its one-device ones (a mean
over an ``ignore_class`` mask is each replica's own), multidev gives TF's 2-replica numbers too.
"""

import json
import math
import os
import re

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_fit_loss_metric_program.py")
with open(os.path.join(HERE, "tf_2.21_fit_loss_metric.json")) as f:
    TF_2_21 = json.load(f)


def _stem(key):
    """Keras 3 numbers metric names per process ('auc_2' for the third AUC made); multidev per model."""
    return re.sub(r"_\d+$", "", key)


def _differences(want, got, path=""):
    if isinstance(want, dict) and isinstance(got, dict):
        if "raises" in want or "raises" in got:   # the exception's type (multidev's messages add a hint);
            # a shape error in fit: TF's graph raises ValueError, multidev its subclass InvalidArgumentError
            same = want.get("raises") == got.get("raises") or (want.get("raises"), got.get("raises")) == (
                "ValueError", "InvalidArgumentError")
            return [] if same else [f"{path}: TF {want} != {got}"]
        if [_stem(k) for k in sorted(want)] != [_stem(k) for k in sorted(got)]:
            return [f"{path}: keys TF {sorted(want)} != {sorted(got)}"]
        return [d for kw, kg in zip(sorted(want), sorted(got)) for d in _differences(want[kw], got[kg], f"{path}/{kw}")]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in _differences(a, b, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)):
        return [] if math.isclose(want, got, rel_tol=2e-5, abs_tol=2e-6) else [f"{path}: TF {want} != {got}"]
    return [] if want == got else [f"{path}: TF {want!r} != {got!r}"]


#: Where multidev's 2-replica result is knowingly not TF's: TF clips each replica's part of the gradient
#: (docs/keras_optimizers.md; multidev clips the sum, giving TF's one-device numbers).
TWO_REPLICAS = {"nadam_clipnorm": "one device"}


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md']; runpy.run_path({PROGRAM!r}, "
                     "run_name='__main__')", timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("replicas", ["1", "2"])
def test_cases_give_tensorflows_results(observed, replicas):
    problems = [p for case in TF_2_21[replicas] if not (replicas == "2" and case in TWO_REPLICAS)
                for p in _differences(TF_2_21[replicas][case], observed[replicas].get(case), f"{replicas}/{case}")]
    assert not problems, "\n".join(problems)


def test_the_known_two_replica_differences(observed):
    assert not _differences(TF_2_21["1"]["nadam_clipnorm"], observed["2"]["nadam_clipnorm"])
    assert _differences(TF_2_21["2"]["nadam_clipnorm"], TF_2_21["1"]["nadam_clipnorm"])   # TF's own differ
    # use_ema: every replica keeps the averages of its own copies (was NotImplementedError): TF's numbers
    assert not _differences(TF_2_21["2"]["adam_ema"], observed["2"]["adam_ema"])


def test_refusals_say_what_keras_3_says(observed):
    for replicas in ("1", "2"):
        got, want = observed[replicas], TF_2_21[replicas]
        assert got["class_and_sample_weight"]["message"].startswith(want["class_and_sample_weight"]["message"][:-1])
        assert "Keras 2's 'crossentropy'" in got["crossentropy_name"]["message"]
        assert got["early_stopping_missing_metric"]["warnings"] == want["early_stopping_missing_metric"]["warnings"]


def test_two_replicas_give_the_one_device_history_where_tensorflow_does(observed):
    """Metrics aggregate over replicas exactly: every case but the masked mean reads the same."""
    for case, one in observed["1"].items():
        if case != "sequence_ignore_class":
            assert not _differences(one, observed["2"][case], case), case
