"""TF's two multi-worker tutorials, typed as printed (``_mw_tutorials_program.py``), give TF 2.21's numbers.

The program runs as 2 workers under ``multidev launch``; ``mw_tutorials_tf.json`` holds what the same
program printed as 2 TensorFlow 2.21 worker processes (``record_mw_tutorials.py``; tf.keras there is
tf_keras 2.21, TF_USE_LEGACY_KERAS=1: Keras 3's ``fit`` fails under MultiWorkerMirroredStrategy with
"unsupported type PerReplica"). Compared: the Keras tutorial's per-epoch loss/accuracy and final
weights; the example ids each worker reads under AUTO and OFF auto-sharding (a wrong shard is a silent
divergence); the custom loop's per-epoch accuracy and loss, its weights and its chief-only checkpoint;
``BackupAndRestore`` after a fit stopped mid-epoch (resume epoch and step, numbers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from multidev.io import gfile
import multidev as md
from tests.multiworker._cluster import ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.timeout(200)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("mw_tutorials")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    env.pop("TF_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2",
                           os.path.join(HERE, "_mw_tutorials_program.py"), "md", str(out)],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"rc={proc.returncode}\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}"
    with open(os.path.join(HERE, "mw_tutorials_tf.json")) as f:
        expected = json.load(f)
    got = []
    for i in range(2):
        with open(out / f"worker{i}.json") as f:
            got.append(json.load(f))
    return out, got, expected


def _close(got, want, rtol):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("worker", [0, 1])
def test_keras_fit_gives_tf_losses_accuracies_and_weights(runs, worker):
    _, got, expected = runs
    got, want = got[worker]["keras"], expected["workers"][worker]["keras"]
    assert sorted(got["history"]) == sorted(want["history"]) == ["accuracy", "loss"]
    _close(got["history"]["loss"], want["history"]["loss"], 1e-5)
    _close(got["history"]["accuracy"], want["history"]["accuracy"], 1e-6)   # counts of 320: exact
    _close(got["weights"], want["weights"], 1e-5)                           # sum, sum of squares


@pytest.mark.parametrize("worker", [0, 1])
def test_fit_on_the_no_auto_shard_dataset_gives_tf_numbers(runs, worker):
    """OFF: each worker trains on its own rebatched stream (the same examples on both), not its
    slices of every global batch; reading global batches here gave other numbers (fixed)."""
    _, got, expected = runs
    got, want = got[worker]["keras_no_auto_shard"], expected["workers"][worker]["keras_no_auto_shard"]
    _close(got["history"]["loss"], want["history"]["loss"], 1e-5)
    _close(got["history"]["accuracy"], want["history"]["accuracy"], 1e-6)
    _close(got["weights"], want["weights"], 1e-5)


@pytest.mark.parametrize("policy", ["AUTO", "OFF", "DATA"])
def test_each_worker_reads_the_examples_tf_gives_it(runs, policy):
    _, got, expected = runs
    for worker in (0, 1):
        assert got[worker]["shard"][policy] == expected["workers"][worker]["shard"][policy], (worker, policy)


def test_file_sharding_of_in_memory_data_fails_as_in_tf(runs):
    _, got, expected = runs
    for worker in (0, 1):
        assert got[worker]["file_policy"] == expected["workers"][worker]["file_policy"] == "NotFoundError"


@pytest.mark.parametrize("worker", [0, 1])
def test_custom_loop_gives_tf_epochs_and_weights(runs, worker):
    _, got, expected = runs
    got, want = got[worker]["ctl"], expected["workers"][worker]["ctl"]
    assert [e[0] for e in got["epochs"]] == [e[0] for e in want["epochs"]] == [0, 1]
    _close([e[1] for e in got["epochs"]], [e[1] for e in want["epochs"]], 1e-6)   # train_accuracy
    _close([e[2] for e in got["epochs"]], [e[2] for e in want["epochs"]], 1e-5)   # train_loss
    _close(got["weights"], want["weights"], 1e-5)
    assert got["chief"] == want["chief"] == (worker == 0)


def test_custom_loop_checkpoint_is_the_chiefs_only(runs):
    out, _, expected = runs
    files = sorted(os.listdir(out / "ckpt"))
    # TF's data file is ckpt-2.data-00000-of-00001; multidev's format names it differently.
    assert [f for f in files if not f.startswith("ckpt-2.data")] == \
        [f for f in expected["ckpt_files"] if not f.startswith("ckpt-2.data")] == ["checkpoint", "ckpt-2.index"]
    assert md.train.latest_checkpoint(str(out / "ckpt")).endswith("ckpt-2")
    assert os.listdir(out / "workertemp_1") == []      # the non-chief's rmtree'd write dir, as in TF


def _files_left(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("worker", [0, 1])
def test_backup_and_restore_resumes_where_tf_does(runs, worker):
    """Stopped after batch 7 (epoch 1, step 2); a new model's fit resumes: in epoch 1 both sides
    (history of epochs 1-2), after 15 optimizer steps in all, and leaves no backup behind."""
    out, got, expected = runs
    for case in ("backup_epoch", "backup_3"):
        g, w = got[worker][case], expected["workers"][worker][case]
        assert len(g["history"]["loss"]) == len(w["history"]["loss"]) == 2, case
        assert g["iterations"] == w["iterations"] == 15, case
        assert _files_left(out / case) == expected["backups_left"][case] == [], case
    g, w = got[worker]["backup_3"], expected["workers"][worker]["backup_3"]   # save_freq=3: step 1 of epoch 1
    _close(g["history"]["loss"], w["history"]["loss"], 1e-5)
    _close(g["history"]["accuracy"], w["history"]["accuracy"], 1e-6)
    _close(g["weights"], w["weights"], 1e-5)


@pytest.mark.xfail(strict=True, reason=(
    "design difference (docs/multi_worker.md, BackupAndRestore): multidev's resumed fit continues the "
    "input where the backup left it (the uninterrupted run's batches); tf_keras 2.21 starts a fresh "
    "iterator over the dataset (epoch 1 re-reads batches 0-4). Same only when the input restarts at the epoch."))
def test_backup_and_restore_at_epoch_end_gives_tf_numbers(runs):
    _, got, expected = runs
    g, w = got[0]["backup_epoch"], expected["workers"][0]["backup_epoch"]
    _close(g["history"]["loss"], w["history"]["loss"], 1e-5)
    _close(g["weights"], w["weights"], 1e-5)


def test_gfile_makedirs_rmtree_as_tf(tmp_path):
    target = tmp_path / "a" / "b"
    gfile.makedirs(str(target))
    gfile.makedirs(target)                               # exists already: no error (TF's too)
    (target / "f").write_text("x")
    assert gfile.exists(target) and gfile.isdir(target) and gfile.listdir(target) == ["f"]
    gfile.rmtree(str(tmp_path / "a"))
    assert not gfile.exists(tmp_path / "a")
    with pytest.raises(md.errors.NotFoundError, match="a not found"):      # TF 2.21's messages
        gfile.rmtree(str(tmp_path / "a"))
    with pytest.raises(md.errors.NotFoundError, match="Could not find directory"):
        gfile.listdir(tmp_path / "a")
    with pytest.raises(md.errors.NotFoundError, match="No such file or directory"):
        gfile.remove(tmp_path / "a")
    with pytest.raises(md.errors.UnimplementedError, match="local paths only"):
        gfile.makedirs("gs://bucket/dir")
