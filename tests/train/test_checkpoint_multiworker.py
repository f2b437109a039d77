"""Checkpoints under MultiWorkerMirroredStrategy: every worker saves, only the chief's files remain,
and the checkpoint restores with another worker count (here: one process, no strategy)."""

from __future__ import annotations

import os

import pytest

import multidev as md
from multidev import keras
from multidev.train import files
from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

BODY = """
import json, os, sys
import numpy as np, torch
import multidev as md
from multidev import keras

directory = os.environ["CKPT_DIR"]
strategy = md.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = keras.Sequential([keras.layers.Dense(4, activation="relu", input_shape=(3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    counter = md.Variable(0.0, synchronization="on_read", aggregation="sum")
x = np.arange(48, dtype="float32").reshape(16, 3) / 48.0
model.fit(x, x[:, :1], batch_size=8, epochs=1, verbose=0, shuffle=False)
strategy.run(lambda: counter.assign_add(1.0))
ckpt = md.train.Checkpoint(model=model, optimizer=model.optimizer, counter=counter)
if strategy.extended.should_checkpoint:   # the chief writes late: a save returns once its files are complete
    import time
    from multidev.train import files
    real_write = files.write
    files.write = lambda *args: (time.sleep(0.5), real_write(*args))[1]
manager = md.train.CheckpointManager(ckpt, directory, max_to_keep=1)
first = manager.save()
second = manager.save()
counter.assign(0.0)
status = ckpt.restore(manager.latest_checkpoint)     # every worker reads the chief's files
status.assert_consumed()
print("RESULT " + json.dumps({"paths": [first, second], "chief": bool(strategy.extended.should_checkpoint),
                              "counter": float(counter), "local": float(counter.values[0]),
                              "weights": [w.detach().reshape(-1).tolist() for w in model.state_dict().values()]}))
"""


def test_only_the_chief_writes_and_another_worker_count_restores(tmp_path):
    directory = str(tmp_path / "ckpts")
    procs = run_cluster(BODY, workers=2, timeout=150, env={"CKPT_DIR": directory, "MULTIDEV_LOGICAL_CPUS": "1"})
    results = [results_json(p) for p in procs]
    assert [r["chief"] for r in results] == [True, False]
    assert results[0]["paths"] == results[1]["paths"] == [os.path.join(directory, "ckpt-1"),
                                                          os.path.join(directory, "ckpt-2")]
    assert results[0]["weights"] == results[1]["weights"] and results[0]["counter"] == 2.0   # one replica per worker adds 1
    assert [r["local"] for r in results] == [1.0, 1.0]       # restored SUM: a share per replica of every worker
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-2.data.safetensors", "ckpt-2.index"]

    model = keras.Sequential([keras.layers.Dense(4, activation="relu", input_shape=(3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    counter = md.Variable(0.0, synchronization="on_read", aggregation="sum")
    ckpt = md.train.Checkpoint(model=model, optimizer=model.optimizer, counter=counter)
    ckpt.restore(md.train.latest_checkpoint(directory)).assert_consumed()
    assert [w.detach().reshape(-1).tolist() for w in model.state_dict().values()] == results[0]["weights"]
    assert float(counter) == results[0]["counter"] and int(ckpt.save_counter) == 2


def test_a_non_chief_worker_writes_to_a_temporary_directory_and_removes_it(tmp_path, monkeypatch, pretend_workers):
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    monkeypatch.setattr(strategy.extended, "should_checkpoint", False)
    pretend_workers(strategy, 1, 1)
    with strategy.scope():
        v = md.Variable([1.0, 2.0])
    written = []
    real_write = files.write
    monkeypatch.setattr(files, "write", lambda prefix, graph, tensors: (written.append(prefix),
                                                                        real_write(prefix, graph, tensors)))
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=v), str(tmp_path), max_to_keep=1)
    assert manager.save() == str(tmp_path / "ckpt-1")
    assert written == [str(tmp_path / "workertemp_1" / "ckpt-1")]
    assert os.listdir(tmp_path) == []               # nothing of this worker's is left, no index written
