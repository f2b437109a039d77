"""A ``keras.Variable(..., trainable=False)`` kept as a model attribute and written with ``assign`` in
``train_step`` (keras.io's NNCLR support-set queue) on 2 replicas: as TensorFlow 2.21's Keras 3 does
(``tf_2.21_variable_queue.json``: aggregation "none", each replica writes its own copy), and not an
AttributeError on the replica's tensor."""

import json
import os

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = """
import json
import numpy as np
import multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
keras, ops = md.keras, md.keras.ops
s = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

class M(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = keras.layers.Dense(2, kernel_initializer="ones")
        self.queue = QUEUE(ops.zeros((4, 2)), trainable=False)
    def call(self, x):
        return self.d(x)
    def train_step(self, data):
        x, y = data
        self.queue.assign(ops.concatenate([x, self.queue[:-ops.shape(x)[0]]], axis=0))
        self.queue.assign_add(ops.ones((4, 2)))
        return {"seen": ops.sum(self.queue)}

out = {}
with s.scope():
    m = M()
    m.compile(optimizer="sgd")
out["aggregation"] = str(m.queue.aggregation).lower()
x = np.arange(8, dtype="float32").reshape(4, 2)
m.fit(x, x, batch_size=4, epochs=1, verbose=0, shuffle=False)
out["copies"] = [np.asarray(v).tolist() for v in m.queue.values]
out["read"] = np.asarray(m.queue.numpy()).tolist()
out["weights"] = len(m.non_trainable_weights)
# in strategy.run: the same variable, its own copy per replica
def fn(v):
    m.queue.assign(ops.zeros((4, 2)) + v)
    return ops.sum(m.queue)
r = s.run(fn, args=(s.experimental_distribute_values_from_function(lambda ctx: float(ctx.replica_id_in_sync_group)),))
out["run"] = [float(t) for t in s.experimental_local_results(r)]
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("make", ["keras.Variable", "md.Variable"])   # Keras 3's, and a TF program's tf.Variable
def test_non_trainable_variable_attribute_assigned_in_train_step_on_two_replicas(make):
    proc = run_fresh(PROGRAM.replace("QUEUE(", make + "("), timeout=300)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    got = json.loads(line[len("RESULT "):])
    with open(os.path.join(HERE, "tf_2.21_variable_queue.json")) as f:
        tf = json.load(f)
    assert "none" in got["aggregation"] and tf["aggregation"] == "none"
    ones = [[1.0, 1.0]] * 2
    # each replica's rows first, the rest of the queue shifted, then +1 (TF's copies, the same program's start)
    assert got["copies"] == [[[1.0, 2.0], [3.0, 4.0]] + ones, [[5.0, 6.0], [7.0, 8.0]] + ones]
    assert tf["tf_variable_attribute_copies"] == got["copies"]
    assert [row[:2] for row in tf["copies"]] == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]]
    assert got["read"] == got["copies"][0]   # replica 0's copy, as TensorFlow reads a NONE-aggregated variable
    assert got["weights"] == 1
    assert got["run"] == [0.0, 8.0]
