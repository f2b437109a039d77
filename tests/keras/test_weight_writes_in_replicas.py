"""A Keras layer's trainable weight written inside ``strategy.run`` as TensorFlow's Keras weights are (aggregation
NONE): ``assign`` writes the calling replica's copy, so a value every replica computes alike (keras.io's mean
teacher: ``t.assign(decay * t + (1 - decay) * s)``) is one device's, not the replicas' sum; a torch in-place
write that leaves the copies apart still raises (tests/programs/keras/p49 trains the whole example)."""

import json

from tests.conftest import run_fresh

PROGRAM = """
import json
import numpy as np
import torch
import multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
K = md.keras
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    student, teacher = K.layers.Dense(2), K.layers.Dense(2)
    student.build((None, 3)); teacher.build((None, 3))
t, s = teacher.kernel, student.kernel
want = 0.9 * t.values[0].detach().clone() + 0.1 * s.values[0].detach()
strategy.run(lambda: t.assign(0.9 * t + 0.1 * s))
out = {"aggregation": t.aggregation.name,
       "ema": [float((c.detach() - want).abs().max()) for c in t.values]}

def drift():
    replica = md.distribute.get_replica_context().replica_id_in_sync_group
    with torch.no_grad():
        teacher.kernel.sub_(float(replica))   # each replica its own amount: the copies part
try:
    strategy.run(drift)
    out["drift"] = None
except ValueError as e:
    out["drift"] = str(e)
print(json.dumps(out))
"""


def test_assign_writes_each_copy_and_drift_still_raises():
    out = json.loads(run_fresh(PROGRAM, timeout=120).stdout.strip().splitlines()[-1])
    assert out["aggregation"] == "NONE"
    assert max(out["ema"]) < 1e-6                     # not 2x the value (SUM added the replicas' writes)
    assert out["drift"] is not None and "differs from replica 0's" in out["drift"]
