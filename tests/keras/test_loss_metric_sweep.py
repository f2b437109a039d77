"""Every md.keras loss and metric, swept over a generated table, gives TensorFlow 2.21's numbers.

The table (class, constructor kwargs, y_true/y_pred kinds and shapes, reductions, sample_weight shapes)
lives in ``_loss_metric_sweep.py``, one program for both frameworks. TensorFlow's observations were
recorded once (``/work/tfvenv/bin/python tests/keras/_loss_metric_sweep.py tf > tests/keras/
tf_2.21_loss_metric_sweep.json``: tensorflow-cpu 2.21.0, tf.keras = Keras 3.15): each case must
give the same value (float32 rounding) or raise the same exception type.
"""

import json
import os

import numpy as np
import pytest

import multidev as md
from tests.keras import _loss_metric_sweep as sweep

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "tf_2.21_loss_metric_sweep.json")) as f:
    TF_2_21 = json.load(f)

#: Keras 3 classes md.keras does not implement (not in the table): md raises AttributeError naming Keras 3's.
NOT_IN_MD = {"losses": ["Circle"]}


def _same(tf_value, md_value):
    if isinstance(tf_value, str) or isinstance(md_value, str):
        return tf_value == md_value
    a, b = np.asarray(tf_value, "float64"), np.asarray(md_value, "float64")
    return a.shape == b.shape and np.allclose(a, b, rtol=3e-6, atol=1e-6, equal_nan=True)


def _mismatches(observed):
    bad = []
    for key, tf_value in TF_2_21.items():
        if not _same(tf_value, observed.get(key, "missing")):
            bad.append(f"{key}: TF {str(tf_value)[:80]} md {str(observed.get(key, 'missing'))[:80]}")
    return bad


def test_every_loss_case_gives_tensorflows_value_or_exception():
    bad = _mismatches(sweep.loss_cases())
    assert not [b for b in bad if "|metric|" not in b], "\n".join(bad[:20])


def test_every_metric_case_gives_tensorflows_value_or_exception():
    observed = sweep.metric_cases()
    bad = [b for b in _mismatches(observed) if "|metric|" in b]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("namespace, name", [(ns, n) for ns, names in NOT_IN_MD.items() for n in names])
def test_a_keras_3_class_md_lacks_raises_naming_it(namespace, name):
    with pytest.raises(AttributeError, match=f"Keras 3 has `keras.{namespace}.{name}`"):
        getattr(getattr(md.keras, namespace), name)


def test_metric_state_merges_exactly_across_replica_stores():
    """The new stateful metrics keep sums: two halves merged equal one update with everything."""
    y_true, y_pred = sweep.DATA["bin"]
    for make in (lambda: md.keras.metrics.F1Score(average="weighted"), lambda: md.keras.metrics.R2Score(),
                 lambda: md.keras.metrics.BinaryIoU(), lambda: md.keras.metrics.AUC(multi_label=True),
                 lambda: md.keras.metrics.PrecisionAtRecall(0.5)):
        whole, first, second = make(), make(), make()
        whole.update_state(y_true, y_pred)
        first.update_state(y_true[:2], y_pred[:2])
        second.update_state(y_true[2:], y_pred[2:])
        first.merge_state([second])
        np.testing.assert_allclose(np.asarray(first.result()), np.asarray(whole.result()), rtol=1e-6)


def test_the_table_covers_every_loss_class_md_exposes():
    exposed = {n for n in dir(md.keras.losses) if isinstance(getattr(md.keras.losses, n), type)
               and issubclass(getattr(md.keras.losses, n), md.keras.losses.Loss)}
    exposed |= set(md.keras.losses._registries()[1])
    swept = {cls for cls, _, _ in sweep.LOSSES}
    assert exposed - {"Loss", "LossFunctionWrapper"} <= swept
