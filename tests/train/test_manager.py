"""md.train.CheckpointManager: numbering, retention, intervals, restore_or_initialize, restarts."""

from __future__ import annotations

import os

import pytest

import multidev as md


def _files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".index"))


def test_keeps_the_last_max_to_keep_and_lists_them(tmp_path):
    v = md.Variable(0.0)
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=v), str(tmp_path), max_to_keep=2)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    paths = []
    for i in range(4):
        v.assign(float(i))
        paths.append(manager.save())
    assert paths == [str(tmp_path / f"ckpt-{i}") for i in range(1, 5)]
    assert manager.checkpoints == paths[2:] and manager.latest_checkpoint == paths[3]
    assert _files(tmp_path) == ["ckpt-3.index", "ckpt-4.index"]
    assert md.train.latest_checkpoint(str(tmp_path)) == paths[3]
    state = md.train.get_checkpoint_state(str(tmp_path))
    assert state.all_model_checkpoint_paths == paths[2:] and len(state.all_model_checkpoint_timestamps) == 2


def test_a_new_manager_continues_the_sequence_and_restores(tmp_path):
    v = md.Variable(1.0)
    ckpt = md.train.Checkpoint(v=v)
    manager = md.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2, checkpoint_name="model")
    manager.save()
    v.assign(2.0)
    manager.save()
    # A restarted job: fresh objects, a fresh manager over the same directory.
    v2 = md.Variable(0.0)
    ckpt2 = md.train.Checkpoint(v=v2)
    manager2 = md.train.CheckpointManager(ckpt2, str(tmp_path), max_to_keep=2, checkpoint_name="model")
    assert manager2.checkpoints == [str(tmp_path / "model-1"), str(tmp_path / "model-2")]
    assert manager2.restore_or_initialize() == str(tmp_path / "model-2")
    assert float(v2) == 2.0 and int(ckpt2.save_counter) == 2
    assert manager2.save() == str(tmp_path / "model-3")
    assert _files(tmp_path) == ["model-2.index", "model-3.index"]


def test_restore_or_initialize_calls_init_fn_without_a_checkpoint(tmp_path):
    calls = []
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=md.Variable(0.0)), str(tmp_path), max_to_keep=None,
                                         init_fn=lambda: calls.append(1))
    assert manager.restore_or_initialize() is None and calls == [1]


def test_checkpoint_number_names_the_file(tmp_path):
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=md.Variable(0.0)), str(tmp_path), max_to_keep=None)
    step = md.Variable(1000, dtype=md.Variable(0).dtype)
    assert manager.save(checkpoint_number=step) == str(tmp_path / "ckpt-1000")
    assert manager.save() == str(tmp_path / "ckpt-2")      # save_counter counts every save


def test_checkpoint_interval_skips_saves_until_enough_steps(tmp_path):
    step = md.Variable(0)
    manager = md.train.CheckpointManager(md.train.Checkpoint(step=step), str(tmp_path), max_to_keep=None,
                                         step_counter=step, checkpoint_interval=10)
    saved = []
    for s in (0, 0, 5, 10, 15, 20):
        step.assign(s)
        saved.append(manager.save() is not None)
    assert saved == [True, False, False, True, False, True]
    step.assign(21)
    assert manager.save(check_interval=False) is not None


def test_keep_checkpoint_every_n_hours_preserves_old_checkpoints(tmp_path, monkeypatch):
    clock = [1_000_000.0]
    monkeypatch.setattr("multidev.train.manager.time.time", lambda: clock[0])
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=md.Variable(0.0)), str(tmp_path), max_to_keep=1,
                                         keep_checkpoint_every_n_hours=1)
    for _ in range(4):
        clock[0] += 1800.0        # half an hour per save
        manager.save()
    # ckpt-2 (saved an hour after the manager started) is kept forever; ckpt-1 and ckpt-3 are deleted.
    assert _files(tmp_path) == ["ckpt-2.index", "ckpt-4.index"]
    assert manager.checkpoints == [str(tmp_path / "ckpt-4")]


def test_bad_arguments_raise():
    ckpt = md.train.Checkpoint(v=md.Variable(0.0))
    with pytest.raises(ValueError, match="max_to_keep.*got 0"):
        md.train.CheckpointManager(ckpt, "/tmp/md_mgr", max_to_keep=0)
    with pytest.raises(ValueError, match="step_counter"):
        md.train.CheckpointManager(ckpt, "/tmp/md_mgr", max_to_keep=1, checkpoint_interval=5)
    with pytest.raises(TypeError, match="unexpected keyword|got an unexpected"):
        md.train.CheckpointManager(ckpt, "/tmp/md_mgr", max_to_keep=1, max_to_kep=2)
