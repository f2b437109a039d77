"""md.random.set_seed, md.keras.utils.set_random_seed and md.summary (TensorBoard event files)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import multidev as md


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
