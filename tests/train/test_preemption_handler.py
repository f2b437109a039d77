"""``md.distribute.experimental.PreemptionCheckpointHandler`` in one process: TensorFlow 2.21's order
(a notice after call 3: call 4 still runs, the checkpoint holds 4 calls, then ``exit_fn``), restore on
creation, the grace period's second save, and its argument errors. SIGTERM and several workers:
``tests/multiworker/test_preemption_workers.py``."""

import pytest
import torch

import multidev as md

Handler = md.distribute.experimental.PreemptionCheckpointHandler
Config = md.distribute.experimental.TerminationConfig


class Exited(Exception):
    pass


def _exit():
    raise Exited


def _state():
    v = md.Variable(0.0)
    return v, md.train.Checkpoint(v=v)


def _train(v):
    v.assign_add(1.0)
    return v.read_value()


def test_notice_after_call_3_saves_4_calls_then_exits_and_a_new_handler_resumes(tmp_path):
    v, ckpt = _state()
    noticed = []
    handler = Handler(None, ckpt, str(tmp_path / "ckpt"),
                      Config(termination_watcher_fn=lambda: bool(noticed), exit_fn=_exit))
    assert handler.total_run_calls == 0
    with pytest.raises(Exited):
        while handler.total_run_calls < 10:
            handler.run(_train, v)
            if handler.total_run_calls == 3:
                noticed.append(True)
    assert handler.total_run_calls == 4 and float(v) == 4.0
    v2, ckpt2 = _state()
    resumed = Handler(None, ckpt2, str(tmp_path / "ckpt"))
    assert resumed.total_run_calls == 4 and float(v2) == 4.0          # restored on creation
    while resumed.total_run_calls < 6:
        assert float(resumed.run(_train, v2)) == resumed.total_run_calls     # one add per call, from 4 on
    assert float(v2) == 6.0


def test_grace_period_saves_then_trains_on_then_saves_again(tmp_path):
    v, ckpt = _state()
    manager = md.train.CheckpointManager(ckpt, str(tmp_path / "ckpt"), max_to_keep=3)
    noticed = []
    saves = []
    handler = Handler(None, manager, termination_config=Config(
        termination_watcher_fn=lambda: bool(noticed), exit_fn=_exit, grace_period=1e-9,
        save_fn=lambda: saves.append((handler.total_run_calls, float(v))) or manager.save()))
    with pytest.raises(Exited):
        for _ in range(10):
            handler.run(_train, v)
            noticed.append(True)
    # notice after call 1 -> call 2 runs, saved at 2 (the grace period's first save); at call 4's check the
    # deadline (already past) is agreed -> call 4 runs, saved at 4, exit
    assert saves == [(2, 2.0), (4, 4.0)]
    assert manager.latest_checkpoint.endswith("ckpt-2")


def test_save_checkpoint_if_preempted_counts_calls(tmp_path):
    v, ckpt = _state()
    noticed = []
    handler = Handler(None, ckpt, str(tmp_path), Config(termination_watcher_fn=lambda: bool(noticed),
                                                         exit_fn=_exit))
    _train(v)
    handler.save_checkpoint_if_preempted()
    noticed.append(True)
    _train(v)
    handler.save_checkpoint_if_preempted()
    with pytest.raises(Exited):
        handler.save_checkpoint_if_preempted()
    assert handler.total_run_calls == 2
    with handler.watch_preemption_scope():
        pass


def test_arguments_are_checked_before_anything_is_written(tmp_path):
    v, ckpt = _state()
    with pytest.raises(md.errors.InvalidArgumentError, match="checkpoint_dir must be passed"):
        Handler(None, ckpt)
    with pytest.raises(TypeError, match="md.train.Checkpoint or md.train.CheckpointManager, got 'ckpt'"):
        Handler(None, "ckpt", str(tmp_path))
    with pytest.raises(TypeError, match="TerminationConfig"):
        Handler(None, ckpt, str(tmp_path), termination_config={"grace_period": 5})
    with pytest.raises(ValueError, match="grace_period must be a number of seconds >= 0, got -1"):
        Config(grace_period=-1)
    with pytest.raises(TypeError, match="exit_fn must be callable"):
        Config(exit_fn=42)
    assert list(tmp_path.iterdir()) == [] and not hasattr(ckpt, "checkpointed_runs")


def test_older_experimental_multi_worker_spelling():
    strategy = md.distribute.experimental.MultiWorkerMirroredStrategy(
        md.distribute.experimental.CollectiveCommunication.RING)
    assert isinstance(strategy, md.distribute.MultiWorkerMirroredStrategy)
    assert strategy.num_replicas_in_sync == 1
    with pytest.raises(AttributeError, match="tf.distribute.experimental.rpc is not part of multidev"):
        md.distribute.experimental.rpc
    assert torch.is_tensor(strategy.run(lambda: torch.ones(1)))
