"""What ``fit``/``evaluate`` log for the values a custom ``train_step``/``test_step`` returns, on 2 replicas
as TF 2.21 logs them (tests/keras/tf_2.21_replica_logs.json, recorded by record_replica_logs.py):
a raw value is the replicas' mean by default (TF 2.21's tf.keras, Keras 3), their sum with
``distribute_reduction_method = "sum"`` (tf-keras 2's default); a metric's result is the merged, exact
one (tf-keras 2's; Keras 3 averages the replicas' results, 7.5 instead of one device's 15 below)."""

from __future__ import annotations

import json
import os

import pytest

import multidev as md
from tests.conftest import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))
TF = json.load(open(os.path.join(HERE, "tf_2.21_replica_logs.json")))
METRICS = ("xmean", "wmean")


@pytest.fixture(scope="module")
def ours():
    code = open(os.path.join(HERE, "_replica_logs_program.py")).read()
    out = run_fresh(code, timeout=240).stdout
    return json.loads(out.split("REPLICA_LOGS ", 1)[1])


def _split(logs, metrics):
    """(raw entries, metric entries) of a list of logs (or of History's dict)."""
    if isinstance(logs, dict):
        logs = [logs]
    return ([{k: v for k, v in d.items() if (k in METRICS) == metrics} for d in logs])


@pytest.mark.parametrize("what", ["history", "train_batch_logs", "test_batch_logs", "evaluate"])
def test_logs_on_two_replicas_are_tf_2_21s(ours, what):
    keras3, tf_keras2 = TF["keras3"], TF["tf_keras2"]
    assert ours["one"][what] == keras3["one"][what] == tf_keras2["one"][what]
    assert _split(ours["two"][what], False) == _split(keras3["two"][what], False)   # mean of the replicas' values
    assert _split(ours["two_sum"][what], False) == _split(tf_keras2["two"][what], False)   # their sum
    for mode in ("two", "two_sum"):   # metrics: merged, as one device
        assert _split(ours[mode][what], True) == _split(tf_keras2["two"][what], True) == _split(ours["one"][what], True)
    assert _split(keras3["two"][what], True) != _split(ours["one"][what], True)   # Keras 3's mean of results


def test_reduction_method_is_tf_keras_2s_attribute(ours):
    assert ours["one"]["drm"] == ours["two"]["drm"] == TF["tf_keras2"]["one"]["distribute_reduction_method"] == "auto"
    assert ours["two_sum"]["drm"] == "sum"
    model = md.keras.Sequential([md.keras.layers.Dense(1)])
    model.distribute_reduction_method = "first"
    assert model.distribute_reduction_method == "first"
    model.distribute_reduction_method = None
    assert model.distribute_reduction_method == "auto"
    with pytest.raises(ValueError, match=r"'avg'.*\"auto\""):
        model.distribute_reduction_method = "avg"
