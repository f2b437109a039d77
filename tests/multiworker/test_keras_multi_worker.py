"""Keras fit on MultiWorkerMirroredStrategy across processes: chief-only writes, a worker killed
mid-epoch and the job resumed from its backup, a hung worker, checkpoints moving between layouts."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.multiworker._cluster import ROOT, results_json, run_cluster
from tests.multiworker._keras_job import SCRIPT, reference_weights

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _job(tmp, workers=2, **env):
    env = {"JOB_DIR": str(tmp), **{k: str(v) for k, v in env.items()}}
    return run_cluster(SCRIPT, workers=workers, timeout=150, env=env)


def _launch(tmp, *flags, **env):
    """``multidev launch --workers 2 --devices-per-worker 2 job.py`` (bounded); the CompletedProcess."""
    script = tmp / "job.py"
    script.write_text(SCRIPT)
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
                JOB_DIR=str(tmp), **{k: str(v) for k, v in env.items()})
    full.pop("TF_CONFIG", None)
    cmd = [sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2", "--devices-per-worker", "2",
           *flags, str(script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=full, cwd=ROOT)


def _launched_results(proc) -> list[dict]:
    """The ``[worker i] RESULT {...}`` lines of a launched job, in worker order."""
    found = {}
    for line in proc.stdout.splitlines():
        for i in (0, 1):
            if line.startswith(f"[worker {i}] RESULT "):
                found[i] = json.loads(line[len(f"[worker {i}] RESULT "):])
    assert proc.returncode == 0 and len(found) == 2, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return [found[0], found[1]]


def _failure(proc) -> str:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert lines, f"rc={proc.returncode}\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
    return lines[0]


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    """``multidev launch``: 2 workers x 2 logical devices, every writing callback, backups every 3 batches."""
    tmp = tmp_path_factory.mktemp("job")
    proc = _launch(tmp, JOB_WRITERS=1, JOB_BACKUP_FREQ=3)
    return tmp, proc, _launched_results(proc)


def test_workers_match_one_process_and_only_the_chief_writes(two_by_two):
    tmp, proc, results = two_by_two
    assert [r["chief"] for r in results] == [True, False]
    assert results[0]["weights"] == results[1]["weights"]
    for got, want in zip(results[0]["weights"], reference_weights()):
        np.testing.assert_allclose(np.array(got, dtype=np.float32), want, rtol=1e-5, atol=1e-6)
    assert sorted(os.listdir(tmp)) == ["ckpt", "job.py", "log.csv", "tb"]   # backup deleted after success
    assert sorted(os.listdir(tmp / "ckpt")) == ["w.01.weights.h5", "w.02.weights.h5", "w.03.weights.h5"]
    assert os.listdir(tmp / "tb") == ["train"] and len(os.listdir(tmp / "tb" / "train")) == 1
    with open(tmp / "log.csv") as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["0", "1", "2"]
    assert "[worker 0] Epoch 1/3" in proc.stdout and "[worker 1] Epoch" not in proc.stdout   # progress: chief only


def test_checkpoint_from_two_workers_restores_on_other_layouts(two_by_two, fresh):
    tmp, _, results = two_by_two
    out = fresh(
        f"""
        import json, numpy as np, torch, multidev as md
        from multidev import keras
        x = np.random.RandomState(1).randn(10, 4).astype("float32")
        def build():
            return keras.models.Sequential([keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                                            keras.layers.Dense(1)])
        path = {str(tmp / "ckpt" / "w.03.weights.h5")!r}
        plain = build(); plain.load_weights(path)
        strategy = md.distribute.MultiWorkerMirroredStrategy()     # no cluster, 3 devices per worker: 1 x 3
        with strategy.scope():
            three = build()
        three.load_weights(path)
        predictions = {{"plain": plain.predict(x, verbose=0).tolist(), "three": three.predict(x, verbose=0).tolist()}}
        copies = all(torch.equal(c, v.values[0]) for v in three.trainable_variables for c in v.values)
        print("RESULT " + json.dumps(dict(predictions, replicas=strategy.num_replicas_in_sync, copies=copies)))
        """,
        env={"MULTIDEV_DEVICES_PER_WORKER": "3", "TF_CONFIG": ""}, timeout=120)
    got = results_json(out)
    assert got["replicas"] == 3 and got["copies"]
    w = [torch.tensor(a) for a in results[0]["weights"]]
    x = torch.tensor(np.random.RandomState(1).randn(10, 4).astype("float32"))
    expected = (torch.relu(x @ w[0] + w[1]) @ w[2] + w[3]).numpy()
    np.testing.assert_allclose(got["plain"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["three"], got["plain"], rtol=1e-6, atol=1e-7)


def test_killed_worker_then_relaunch_resumes_to_the_uninterrupted_weights(two_by_two, tmp_path):
    reference = two_by_two[2]                  # the same job, uninterrupted
    common = {"JOB_WRITERS": 1, "JOB_BACKUP_FREQ": 3}
    crashed = _job(tmp_path, JOB_CRASH="1:8", JOB_TIMEOUT=20, MULTIDEV_LOGICAL_CPUS=2, **common)   # worker 1 dies after batch 8
    assert crashed[1].returncode == 17                                       # (epoch 1, step 2); last
    assert crashed[0].returncode == 3                                        # backup: after batch 6
    message = _failure(crashed[0])
    assert message.startswith("FAILED UnavailableError") and "worker 1" in message, message
    assert os.path.exists(tmp_path / "backup" / "state.json")

    proc = _launch(tmp_path, **common)                    # relaunch the job
    assert "[worker 0] Epoch 2/3" in proc.stdout and "Epoch 1/3" not in proc.stdout   # resumed in epoch 1 (0-based)
    resumed = _launched_results(proc)
    assert resumed[0]["weights"] == resumed[1]["weights"]
    assert resumed[0]["weights"] == reference[0]["weights"]     # bitwise
    assert resumed[0]["iterations"] == reference[0]["iterations"] == 15
    assert not os.path.exists(tmp_path / "backup")


def test_hung_worker_is_named_by_every_survivor(tmp_path):
    procs = run_cluster(SCRIPT, workers=3, timeout=150, wait_ranks=[0, 1],
                        env={"JOB_DIR": str(tmp_path), "JOB_HANG": "2:4", "JOB_TIMEOUT": "5"})
    for proc in procs[:2]:
        assert proc.returncode == 3
        message = _failure(proc)
        assert message.startswith("FAILED DeadlineExceededError") and "worker 2" in message, message


def test_launcher_propagates_a_failing_worker_and_stops_the_hung_one(tmp_path):
    proc = _launch(tmp_path, "--stop-grace", "1", JOB_HANG="1:2", JOB_TIMEOUT=5)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith("[worker 0] FAILED ")]
    assert failed and "DeadlineExceededError" in failed[0] and "worker 1" in failed[0], proc.stdout
    assert "worker 0 failed with exit code 3; stopping worker 1" in proc.stdout + proc.stderr
