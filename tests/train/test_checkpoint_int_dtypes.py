"""``md.Variable(<Python int>)`` is int32, as in TensorFlow (it was int64 before 2026-11-27). A checkpoint
never casts, so a step counter saved as int64 is refused whole, with the fix in the message, and reads
into ``md.Variable(0, dtype=md.int64)``."""

from __future__ import annotations

import pytest

import multidev as md
from multidev._core.errors import InvalidArgumentError


def test_int64_counter_of_an_older_checkpoint_names_the_fix(tmp_path):
    saved_step, saved_w = md.Variable(7, dtype=md.int64), md.Variable([1.0, 2.0])
    path = md.train.Checkpoint(step=saved_step, w=saved_w).save(str(tmp_path / "ckpt"))
    assert md.Variable(0).dtype == md.int32

    step, w = md.Variable(0), md.Variable([0.0, 0.0])
    with pytest.raises(InvalidArgumentError, match=r"expected dtype int32 does not equal original dtype int64") as err:
        md.train.Checkpoint(step=step, w=w).restore(path)
    assert "md.Variable(0, dtype=md.int64)" in str(err.value)
    assert int(step) == 0 and w.numpy().tolist() == [0.0, 0.0]          # nothing restored

    step = md.Variable(0, dtype=md.int64)
    md.train.Checkpoint(step=step, w=w).restore(path).assert_consumed()
    assert int(step) == 7 and w.numpy().tolist() == [1.0, 2.0]


def test_other_dtype_mismatches_keep_the_plain_message(tmp_path):
    path = md.train.Checkpoint(w=md.Variable([1.0], dtype=md.float64)).save(str(tmp_path / "ckpt"))
    with pytest.raises(InvalidArgumentError) as err:
        md.train.Checkpoint(w=md.Variable([0.0])).restore(path)
    assert "float32 does not equal original dtype float64" in str(err.value) and "2026-11-27" not in str(err.value)
