"""A damaged ``.index`` never restores part of a checkpoint silently, and a partial restore says so
unless ``expect_partial()`` (issue 24 item 5; TensorFlow logs the same warning when the restore's
status goes away with values unused)."""

from __future__ import annotations

import gc
import json
import logging
import random

import pytest
import torch

import multidev as md
from multidev import keras


def _trained(seed=0):
    torch.manual_seed(seed)
    model = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(0.1)
    x, y = torch.randn(8, 2), torch.randn(8, 1)
    with md.GradientTape() as tape:
        loss = md.reduce_mean((model(x) - y) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return model, opt


def _state(model, opt):
    return [t.detach().clone() for t in model.state_dict().values()] + [
        t.detach().clone() for t in opt.variables]


def test_every_bit_flip_in_the_index_raises_or_restores_everything(tmp_path):
    model, opt = _trained()
    step = md.Variable(7)
    prefix = md.train.Checkpoint(model=model, optimizer=opt, step=step).write(str(tmp_path / "ck"))
    index = tmp_path / "ck.index"
    raw = index.read_bytes()
    expected = _state(model, opt) + [torch.tensor(7)]
    rng = random.Random(0)
    outcomes = {"DataLossError": 0, "restored": 0}
    fresh, fresh_opt = _trained(seed=1)
    fresh_step = md.Variable(0)
    before = _state(fresh, fresh_opt) + [fresh_step.detach().clone()]
    for _ in range(150):
        damaged = bytearray(raw)
        at = rng.randrange(len(raw))
        damaged[at] ^= 1 << rng.randrange(8)
        index.write_bytes(bytes(damaged))
        try:
            status = md.train.Checkpoint(model=fresh, optimizer=fresh_opt, step=fresh_step).read(prefix)
        except md.errors.DataLossError as err:
            assert "ck" in str(err)
            got = _state(fresh, fresh_opt) + [fresh_step.detach().clone()]
            assert all(torch.equal(a, b) for a, b in zip(got, before)), "a refused restore changed values"
            outcomes["DataLossError"] += 1
            continue
        status.assert_consumed()       # a harmless flip (layout only): everything restored
        got = _state(fresh, fresh_opt) + [fresh_step.detach().clone()]
        assert all(torch.equal(a, b) for a, b in zip(got, expected)), f"byte {at} restored wrong values"
        outcomes["restored"] += 1
        fresh, fresh_opt = _trained(seed=1)
        fresh_step = md.Variable(0)
    assert outcomes["DataLossError"] >= 140, outcomes


def test_a_changed_name_in_the_index_is_reported(tmp_path):
    model, opt = _trained()
    prefix = md.train.Checkpoint(model=model, optimizer=opt).write(str(tmp_path / "ck"))
    index = tmp_path / "ck.index"
    graph = json.loads(index.read_text())
    graph["objects"]["modex"] = graph["objects"].pop("model")      # valid JSON, one name changed
    index.write_text(json.dumps(graph))
    with pytest.raises(md.errors.DataLossError, match=r"ck\.index' does not match the checksum"):
        md.train.Checkpoint(model=_trained(1)[0]).read(prefix)


def test_a_format_1_index_without_its_own_checksum_is_still_read(tmp_path):
    v = md.Variable([1.0, 2.0])
    prefix = md.train.Checkpoint(v=v).write(str(tmp_path / "old"))
    index = tmp_path / "old.index"
    graph = json.loads(index.read_text())
    del graph["index_sha256"]
    graph["format"] = "multidev.train.checkpoint/1"
    index.write_text(json.dumps(graph))
    v2 = md.Variable([0.0, 0.0])
    md.train.Checkpoint(v=v2).read(prefix).assert_consumed()
    assert v2.tolist() == [1.0, 2.0]


@pytest.fixture
def train_log(caplog):
    """Warnings of multidev.train from this test only (statuses of earlier tests collected first)."""
    gc.collect()
    caplog.set_level(logging.WARNING, logger="multidev.train")
    caplog.clear()
    return caplog


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "multidev.train"]


def test_a_partial_restore_warns_as_tensorflow_does_unless_expect_partial(tmp_path, train_log):
    caplog = train_log
    prefix = md.train.Checkpoint(v=md.Variable(1.0), w=md.Variable(2.0)).write(str(tmp_path / "full"))
    status = md.train.Checkpoint(v=md.Variable(0.0)).read(prefix)
    assert _warnings(caplog) == []               # not while the status may still be checked
    del status
    gc.collect()
    messages = _warnings(caplog)
    assert "being deleted with unrestored values" in messages[0] and "expect_partial()" in messages[0]
    assert messages[1:] == ["Value in checkpoint could not be found in the restored object: (root).w"]
    caplog.clear()
    md.train.Checkpoint(v=md.Variable(0.0)).read(prefix).expect_partial()
    gc.collect()
    assert _warnings(caplog) == []


def test_restore_or_initialize_of_a_partial_match_warns(tmp_path, train_log):
    caplog = train_log
    model, opt = _trained()
    md.train.CheckpointManager(md.train.Checkpoint(model=model, optimizer=opt), str(tmp_path), 1).save()
    manager = md.train.CheckpointManager(md.train.Checkpoint(model=_trained(1)[0]), str(tmp_path), 1)
    assert manager.restore_or_initialize() == str(tmp_path / "ckpt-1")
    gc.collect()
    assert _warnings(caplog) == []     # `optimizer` may still be assigned to the Checkpoint and restored
    del manager                        # the checkpoint goes away with values unused: TF warns now
    gc.collect()
    lost = [m for m in _warnings(caplog) if m.startswith("Value in checkpoint")]
    assert "Value in checkpoint could not be found in the restored object: (root).optimizer.iterations" in lost
    assert all(m.startswith("Value in checkpoint could not be found in the restored object: (root).optimizer.")
               for m in lost) and any(m.endswith("(root).optimizer.model.layers.0.kernel/momentum") for m in lost)


def test_values_waiting_for_a_lazily_built_model_do_not_warn(tmp_path, train_log):
    caplog = train_log
    model, _ = _trained()
    prefix = md.train.Checkpoint(model=model).write(str(tmp_path / "m"))
    lazy = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(1)])
    md.train.Checkpoint(model=lazy).read(prefix)      # status dropped at once
    gc.collect()
    lazy(torch.ones(1, 2))                             # built now: the waiting values land
    gc.collect()
    assert _warnings(caplog) == []
    assert all(torch.equal(a, b) for a, b in zip(lazy.state_dict().values(), model.state_dict().values()))
