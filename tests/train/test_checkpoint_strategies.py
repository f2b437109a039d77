"""A checkpoint saved under one strategy restores under another or none (fresh interpreters)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

COMMON = """
import json, sys
import numpy as np, torch
import multidev as md
from multidev import keras

directory = sys.argv[1] if len(sys.argv) > 1 else {directory!r}
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 4)).astype("float32")
y = rng.normal(size=(32, 1)).astype("float32")

def build():
    model = keras.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                              keras.layers.BatchNormalization(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    counter = md.Variable(0.0, synchronization="on_read", aggregation="sum")
    return model, counter

def weights(model):
    return [w.detach().reshape(-1).tolist() for w in model.state_dict().values()]

def report(**kw):
    print("RESULT " + json.dumps(kw))
"""

SAVE_MIRRORED = COMMON + """
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
with strategy.scope():
    model, counter = build()
model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
strategy.run(lambda: counter.assign_add(1.0))          # each replica adds 1: the sum reads 2
ckpt = md.train.Checkpoint(model=model, optimizer=model.optimizer, counter=counter)
path = ckpt.save(directory + "/ckpt")
report(path=path, weights=weights(model), iterations=int(model.optimizer.iterations), counter=float(counter))
"""

RESTORE_PLAIN = COMMON + """
model, counter = build()                                # no strategy; the model is not built yet
ckpt = md.train.Checkpoint(model=model, optimizer=model.optimizer, counter=counter)
status = ckpt.restore(md.train.latest_checkpoint(directory))
model(torch.as_tensor(x[:1]))                           # deferred values land when the layers build
status.assert_consumed()
restored = dict(weights=weights(model), eval=model.evaluate(x, y, batch_size=8, verbose=0),
                iterations=int(model.optimizer.iterations), counter=float(counter))
model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
path = ckpt.save(directory + "/ckpt")
report(restored=restored, path=path, weights=weights(model), iterations=int(model.optimizer.iterations))
"""

RESTORE_MIRRORED = COMMON + """
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model, counter = build()
    model.build((None, 4))
ckpt = md.train.Checkpoint(model=model, optimizer=model.optimizer, counter=counter)
ckpt.restore(directory + "/ckpt-1").assert_consumed()
first = dict(weights=weights(model), eval=model.evaluate(x, y, batch_size=8, verbose=0), counter=float(counter),
             local_counters=[float(v) for v in counter.values])
ckpt.restore(md.train.latest_checkpoint(directory)).assert_consumed()
report(first=first, weights=weights(model), iterations=int(model.optimizer.iterations), counter=float(counter),
       save_counter=int(ckpt.save_counter))
"""


def _result(proc):
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no RESULT line:\n{proc.stdout}\n{proc.stderr}")


def test_mirrored_to_no_strategy_and_back(fresh, tmp_path):
    directory = str(tmp_path)
    two_cpus = {"MULTIDEV_LOGICAL_CPUS": "2"}
    saved = _result(fresh(SAVE_MIRRORED.format(directory=directory), env=two_cpus))
    assert saved["counter"] == 2.0 and saved["path"].endswith("ckpt-1")

    plain = _result(fresh(RESTORE_PLAIN.format(directory=directory), env={"MULTIDEV_LOGICAL_CPUS": "1"}))
    restored = plain["restored"]
    assert restored["weights"] == saved["weights"]                 # bit for bit: one canonical copy
    assert restored["iterations"] == saved["iterations"] and restored["counter"] == 2.0
    assert plain["path"].endswith("ckpt-2") and plain["iterations"] == saved["iterations"] + 4

    back = _result(fresh(RESTORE_MIRRORED.format(directory=directory), env=two_cpus))
    first = back["first"]
    # The saved batch-norm statistics are the replicas' mean (sync-on-read MEAN, as TF saves them);
    # restored, every replica holds it, so two replicas evaluate as one device does (up to summation order).
    assert first["weights"] == saved["weights"]
    for got, want in zip(first["eval"], restored["eval"]):
        assert abs(got - want) <= 1e-5 * max(1.0, abs(want))
    assert first["counter"] == 2.0 and first["local_counters"] == [1.0, 1.0]      # SUM split in shares
    assert back["weights"] == plain["weights"] and back["iterations"] == plain["iterations"]
    assert back["counter"] == 2.0 and back["save_counter"] == 2
