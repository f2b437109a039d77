"""md.random.set_seed, md.keras.utils.set_random_seed and md.summary (TensorBoard event files)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import multidev as md
from tests.conftest import run_fresh


def test_set_seed_makes_torch_ops_and_shuffles_repeat():
    def draw():
        ds = md.data.Dataset.range(20).shuffle(20)
        return torch.rand(3).tolist(), [int(v) for v in ds]

    md.random.set_seed(42)
    first = draw()
    md.random.set_seed(42)
    assert draw() == first
    md.random.set_seed(43)
    assert draw() != first
    with pytest.raises(TypeError, match="integer seed.*'x'"):
        md.random.set_seed("x")


def test_keras_set_random_seed_seeds_python_numpy_and_torch():
    md.keras.utils.set_random_seed(7)
    first = (random.random(), float(np.random.rand()), float(torch.rand(())))
    md.keras.utils.set_random_seed(7)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == first
    with pytest.raises(ValueError, match="Expected `seed` argument to be an integer. Received: seed=1.5"):
        md.keras.utils.set_random_seed(1.5)


def _scalars(logdir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logdir))
    events.Reload()
    return [(e.step, round(e.value, 6)) for e in events.Scalars(tag)]


def test_scalars_reach_tensorboard_event_files(tmp_path):
    writer = md.summary.create_file_writer(str(tmp_path / "train"))
    step = md.Variable(0)
    with writer.as_default(step=step):
        for i in range(3):
            step.assign(i)
            assert md.summary.scalar("loss", 1.0 / (i + 1)) is True       # the step variable, read now
        assert md.summary.scalar("accuracy", torch.tensor(0.5), step=10)
    writer.flush()
    assert _scalars(tmp_path / "train", "loss") == [(0, 1.0), (1, 0.5), (2, 0.333333)]
    assert _scalars(tmp_path / "train", "accuracy") == [(10, 0.5)]


def test_without_a_default_writer_nothing_is_written():
    assert md.summary.scalar("loss", 1.0, step=0) is False


def test_step_is_required_and_scalars_must_be_scalars(tmp_path):
    writer = md.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        with pytest.raises(ValueError, match="No step set"):
            md.summary.scalar("loss", 1.0)
        md.summary.experimental.set_step(5)
        try:
            assert md.summary.experimental.get_step() == 5 and md.summary.scalar("loss", 1.0)
        finally:
            md.summary.experimental.set_step(None)
        with pytest.raises(ValueError, match=r"needs a scalar.*\(2,\)"):
            md.summary.scalar("loss", torch.ones(2), step=0)
    writer.close()
    assert _scalars(tmp_path, "loss") == [(5, 1.0)]


def test_set_as_default_and_noop_writer(tmp_path):
    writer = md.summary.create_file_writer(str(tmp_path))
    writer.set_as_default(step=3)
    try:
        assert md.summary.scalar("x", 2.0) and md.summary.histogram("h", torch.arange(10.0))
        md.summary.flush()
    finally:
        md.summary.create_noop_writer().set_as_default()
        md.summary.experimental.set_step(None)
    assert md.summary.scalar("x", 1.0, step=4) is True       # accepted, written nowhere
    assert _scalars(tmp_path, "x") == [(3, 2.0)]


def test_record_if_and_should_record_summaries(tmp_path):
    writer = md.summary.create_file_writer(str(tmp_path))
    step = md.Variable(0, dtype=torch.int64)
    with writer.as_default(step=step):
        assert md.summary.should_record_summaries() is True
        with md.summary.record_if(lambda: int(step) % 2 == 0):
            for _ in range(4):
                md.summary.scalar("loss", float(step))
                step.assign_add(1)
        with md.summary.record_if(False):
            assert md.summary.scalar("off", 1.0) is False and md.summary.should_record_summaries() is False
        md.summary.flush()
    assert _scalars(tmp_path, "loss") == [(0, 0.0), (2, 2.0)]


def test_inside_strategy_run_only_the_first_replica_records():
    """TensorFlow records a summary written in a replica function once, from replica 0."""
    out = run_fresh("""
        import tempfile, multidev as md
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        strategy = md.distribute.MirroredStrategy()
        logdir = tempfile.mkdtemp()
        writer = md.summary.create_file_writer(logdir)

        def replica_fn():
            ctx = md.distribute.get_replica_context()
            return md.summary.scalar("replica_id", float(ctx.replica_id_in_sync_group), step=1)

        with writer.as_default():
            wrote = strategy.experimental_local_results(strategy.run(replica_fn))
        writer.flush()
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        events = EventAccumulator(logdir)
        events.Reload()
        print(list(wrote), [(e.step, e.value) for e in events.Scalars("replica_id")])
    """)
    assert out.stdout.strip() == "[True, False] [(1, 0.0)]"
