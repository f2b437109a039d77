"""Layer and model state written inside ``call`` on 2 replicas, replayed against TensorFlow 2.21.

The cases (``_layer_state_cases.py``: the guide's ``ComputeSum`` and its neighbours, every weight
policy under assign/assign_add/assign_sub in and out of replicas, a batch counter and a moving mean
in ``fit``, a program's own variable, metric attributes) run once on md in a fresh interpreter with
2 logical CPUs; ``tf_2.21_layer_state.json`` holds TensorFlow's numbers (``record_layer_state.py``)
with tf-keras 2 (``tf_keras2``, TensorFlow's enums) and Keras 3 (``keras3``, its strings). md.keras
takes both spellings, so each case is compared with the flavour that accepts its spelling; where
both run, with tf-keras 2 (md.keras's API), and they agree there except where ``KNOWN`` says.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = json.load(open(os.path.join(HERE, "tf_2.21_layer_state.json")))

#: Cases whose reference is another recorded case, and why.
KNOWN = {
    # Keras 3's Variable.assign_add is assign(value + delta), so with aggregation "sum" the replicas'
    # new totals are summed (the total counted once per replica: 9 then 21 where TF's variable gives
    # 6 then 9). md.keras follows tf.Variable's SUM (tf-keras 2's aggregation=SUM): the deltas are summed.
    "compute_sum_sum_string_assign_add": ("tf_keras2", "compute_sum_sum_assign_add"),
    "compute_sum_sum_string_assign_sub": ("tf_keras2", "compute_sum_sum_assign_sub"),
    "fit_counter_sum_string": ("tf_keras2", "fit_counter_sum"),
}

_MD_SIDE = r"""
import json, logging, os, sys, warnings
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "keras"))
import multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
from _layer_state_cases import all_cases
observed = {}
for name, case in all_cases():
    try:
        observed[name] = case(md, md.keras, "md")
    except Exception as exc:
        observed[name] = {"raises": type(exc).__name__, "message": str(exc)[:400]}
print("\n" + json.dumps(observed))
"""


@pytest.fixture(scope="module")
def md_observed() -> dict:
    proc = run_fresh(_MD_SIDE, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reference(name: str):
    """TensorFlow's observation for case ``name``: tf-keras 2's unless only Keras 3 runs it."""
    if name in KNOWN:
        flavour, other = KNOWN[name]
        return RECORD[flavour]["cases"][other]
    k2, k3 = RECORD["tf_keras2"]["cases"][name], RECORD["keras3"]["cases"][name]
    return k3 if _raises(k2) and not _raises(k3) else k2


def _raises(observation) -> bool:
    return isinstance(observation, dict) and "raises" in observation


def same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if _raises(a) and _raises(b):
        return a["raises"] == b["raises"]
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


CASES = sorted(RECORD["tf_keras2"]["cases"])


@pytest.mark.parametrize("name", CASES)
def test_as_tensorflow(md_observed, name):
    assert same(md_observed[name], reference(name)), (
        f"{name}:\n  md: {json.dumps(md_observed[name])}\n  tf: {json.dumps(reference(name))}")


def test_known_differences_still_differ():
    """Keras 3's own result for each KNOWN case is still what the note says (else drop the note)."""
    for name, (flavour, other) in KNOWN.items():
        assert not same(RECORD["keras3"]["cases"][name], RECORD[flavour]["cases"][other]), name


def test_every_case_recorded(md_observed):
    assert sorted(md_observed) == CASES


# --- without a strategy, and what add_weight refuses (in this process: no device configuration) --------

def _counter_model():
    import multidev as md

    class Counter(md.keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.seen = md.keras.metrics.Sum(name="seen")

        def build(self, input_shape):
            self.count = self.add_weight(name="count", shape=(), initializer="zeros", trainable=False)

        def call(self, inputs):
            self.count.assign_add(md.cast(md.shape(inputs)[0], md.float32))
            self.seen.update_state(md.cast(md.shape(inputs)[0], md.float32))
            return inputs

    counter = Counter()
    return counter, md.keras.Sequential([md.keras.Input((2,)), counter, md.keras.layers.Dense(1)])


def test_building_a_functional_model_writes_no_state():
    """TF builds symbolically; md infers shapes on zeros, whose writes are put back (count stays 0)."""
    counter, model = _counter_model()
    assert float(counter.count.numpy()) == 0.0 and float(counter.seen.result()) == 0.0
    model(__import__("numpy").ones((3, 2), "float32"))
    assert float(counter.count.numpy()) == 3.0 and float(counter.seen.result()) == 3.0


def test_metric_attributes_are_model_metrics_once():
    counter, model = _counter_model()
    model.compile("sgd", "mse", metrics=[counter.seen])   # also compiled: listed once
    assert [m.name for m in model.metrics].count("seen") == 1
    counter, model = _counter_model()
    assert [m.name for m in model.metrics] == ["seen"]
    del counter.seen                                       # no longer an attribute: no longer listed
    assert model.metrics == []


@pytest.mark.parametrize("kwargs, words", [
    (dict(trainable=True, synchronization="on_read"), "only for non-trainable"),
    (dict(trainable=False, aggregation="average"), "'average'"),
    (dict(trainable=False, synchronization="sometimes"), "'sometimes'"),
])
def test_add_weight_refuses_bad_policies(kwargs, words):
    import multidev as md

    layer = md.keras.layers.Layer()
    with pytest.raises(ValueError, match=words):
        layer.add_weight(name="w", shape=(2,), **kwargs)


def test_on_read_weight_defaults_to_non_trainable():
    import multidev as md

    layer = md.keras.layers.Layer()
    layer.add_weight(name="w", shape=(2,), synchronization=md.VariableSynchronization.ON_READ)
    assert layer.trainable_weights == [] and len(layer.non_trainable_weights) == 1
