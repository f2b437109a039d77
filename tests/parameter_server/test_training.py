"""Asynchronous training on real clusters: one chief, two workers, one or two ps, as processes on loopback.

Each test launches one cluster (about 15-25 s on two cores, mostly interpreter start-up); every
wait is bounded by the harness timeout and ``MULTIDEV_RPC_TIMEOUT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.parameter_server._cluster import ROOT, describe, result_json, run_cluster
from tests.parameter_server._scripts import CHECKPOINTED, REGRESSION, SHARDED_KERAS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _chief_ok(results):
    assert results["chief:0"].returncode == 0, describe(results)
    return result_json(results["chief:0"])


def test_async_training_converges_like_sync(tmp_path):
    """Launched as users do: ``multidev launch --chief --workers 2 --ps 1 script.py``."""
    script = tmp_path / "train.py"
    script.write_text(REGRESSION)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), MULTIDEV_RPC_TIMEOUT="60")
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--chief", "--workers", "2", "--ps", "1",
                           str(script)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("[chief 0] RESULT "))
    out = json.loads(line[len("[chief 0] RESULT "):])
    threshold = 0.01
    assert out["initial"] > 1.0
    assert out["sync_final"] < threshold          # the synchronous reference reaches it ...
    assert out["final"] < threshold, out           # ... and so does asynchronous training
    assert out["steps_done"] == 240


def test_sharded_embedding_trains_with_keras_fit():
    results = run_cluster(SHARDED_KERAS, workers=2, ps=2, timeout=180)
    out = _chief_ok(results)
    assert out["type"] == "ShardedVariable"
    assert out["shards"] == [[20, 8], [20, 8]] and out["shard_ps"] == [0, 1]
    assert min(out["changed_rows_per_shard"]) > 0      # gradients reached both shards
    assert out["loss"][-1] < out["loss"][0]
    # fit's metrics live on the ps (built and reset on the coordinator), as TF's do: logs cover every worker
    assert out["metric_state"] == ["PSVariable"] and out["fit_accuracy"][-1] > out["fit_accuracy"][0]
    assert out["weights_listed"] == [[20, 8], [20, 8]]     # layer.weights lists the shards, as TF
    assert out["accuracy"] > 0.9, out
    assert out["lookup_matches"] and out["shard_values_match"]
    # md.Variable in scope: round-robin over the 2 ps (after the model's variables), remote reads and writes
    assert sorted(out["counter_ps"]) == [0, 0, 1] and out["counter_ps"][0] != out["counter_ps"][1]
    assert out["counter0"] == 2.0 and out["bumped"] == 11.0 and out["counter1"] == 11.0
    # errors of scheduled functions surface at join, name the worker, and do not stop the coordinator
    assert "bad batch on purpose" in out["error"] and "scheduled function on worker" in out["error"]
    assert out["out_of_range"] is not None and "repeat" in out["out_of_range"]
    assert "created inside a scheduled function" in out["mixed"]
    assert out["after_error_ok"] == 21.0


def test_killed_worker_work_is_retried_and_training_converges():
    results = run_cluster(REGRESSION, workers=2, ps=1, timeout=180, env={"KILL_WORKER": "1"})
    out = _chief_ok(results)
    assert results["worker:1"].returncode == 3, describe(results)
    assert out["steps_done"] == 240                      # every scheduled step finished, none lost
    assert out["final"] < 0.01, out
    assert "worker 1" in results["chief:0"].stderr and "retried on another worker" in results["chief:0"].stderr


def test_lost_ps_is_named_and_relaunch_resumes_from_checkpoint(tmp_path):
    env = {"CKPT_DIR": str(tmp_path / "ckpt"), "KILL_PS": "1"}
    first = run_cluster(CHECKPOINTED, workers=2, ps=1, timeout=180, env=env)
    out = _chief_ok(first)
    assert out["start"] == 0 and out["saved_step"] == 60
    assert out["error"] is not None and "ps:0" in out["error"], out
    assert "checkpoint" in out["error"]

    second = run_cluster(CHECKPOINTED, workers=2, ps=1, timeout=180, env={"CKPT_DIR": env["CKPT_DIR"]})
    resumed = _chief_ok(second)
    assert resumed["start"] == 60
    assert resumed["loss_at_start"] == pytest.approx(out["loss_at_save"], rel=1e-6, abs=1e-9)
    assert resumed["loss_at_save"] < resumed["loss_at_start"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["ckpt-120", "ckpt-60"]


ABSENT = '''
import json, multidev as md
try:
    md.distribute.ParameterServerStrategy(md.distribute.cluster_resolver.TFConfigClusterResolver())
    print("RESULT", json.dumps({"error": None}))
except md.errors.DeadlineExceededError as err:
    print("RESULT", json.dumps({"error": str(err)}))
'''


def test_a_task_that_never_starts_is_named_within_the_timeout():
    results = run_cluster(ABSENT, workers=2, ps=1, timeout=90, env={"MULTIDEV_RPC_TIMEOUT": "5"},
                          absent=("worker:1",))
    out = _chief_ok(results)
    assert out["error"] is not None and "worker 1 (127.0.0.1:" in out["error"] and "did not join" in out["error"]
