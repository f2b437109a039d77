"""A model's own ``train_step`` returning a raw value under MultiWorkerMirroredStrategy (2 workers x 2 logical
CPUs): every worker logs the mean over all 4 replicas (TF 2.21's tf.keras, as on one process's replicas:
tests/keras/test_replica_logs.py), its sum with ``distribute_reduction_method = "sum"``; a metric's result is
the merged one."""

from __future__ import annotations

import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BODY = """
import json, numpy as np, multidev as md
keras, ops = md.keras, md.keras.ops
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))

class M(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = keras.layers.Dense(1)
        self.tracker = keras.metrics.Mean(name="xmean")

    def call(self, x):
        return self.d(x)

    def train_step(self, data):
        x, y = data
        self.tracker.update_state(x)
        return {"raw": ops.mean(x), "n": ops.cast(ops.shape(x)[0], "float32"), "xmean": self.tracker.result()}

    @property
    def metrics(self):
        return [self.tracker]

out = {}
x = np.arange(16, dtype="float32").reshape(16, 1) ** 2
for method in ("auto", "sum"):
    with strategy.scope():
        model = M()
        model.compile(optimizer="sgd")
    model.distribute_reduction_method = method
    out[method] = model.fit(x, np.zeros((16, 1), "float32"), batch_size=8, epochs=1, verbose=0, shuffle=False).history
print("RESULT " + json.dumps({"replicas": strategy.num_replicas_in_sync, "logs": out}), flush=True)
"""


def test_raw_values_are_reduced_over_every_workers_replicas():
    procs = run_cluster(BODY, workers=2, timeout=150, env={"MULTIDEV_LOGICAL_CPUS": "2"})
    x = [float(i * i) for i in range(16)]
    last = x[8:]                                  # the last global batch: 4 replicas of 2 examples each
    quarter_means = [sum(last[i:i + 2]) / 2 for i in range(0, 8, 2)]
    for proc in procs:
        result = results_json(proc)
        assert result["replicas"] == 4
        auto, summed = result["logs"]["auto"], result["logs"]["sum"]
        assert auto["raw"] == [pytest.approx(sum(quarter_means) / 4)] and auto["n"] == [2.0]
        assert summed["raw"] == [pytest.approx(sum(quarter_means))] and summed["n"] == [8.0]
        assert auto["xmean"] == summed["xmean"] == [pytest.approx(sum(x) / 16)]
