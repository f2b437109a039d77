"""ParameterServerCheckpoint in-process (one ps served by ``ps_service`` in this process): only allowed
optimizer classes are rebuilt, damaged files are named, a killed save leaves the previous checkpoint."""

from __future__ import annotations

import json
import os
import types

import pytest
import torch

import multidev as md
from multidev.distribute.parameter_server import ps_service
from multidev.distribute.parameter_server.checkpoint import ParameterServerCheckpoint
from multidev.distribute.parameter_server.ps_service import OptimizerSpec


class _Client:
    num_ps = 1

    def export_state(self):
        return {0: ps_service.export_state()}

    def import_state(self, per_ps):
        ps_service.import_state(*per_ps[0])


def _strategy():
    spec = types.SimpleNamespace(vid=1, name="w", shape=(3,), layout=[types.SimpleNamespace(ps=0, vid=1, start=None,
                                                                                            end=None)])
    extended = types.SimpleNamespace(num_ps=1, client=_Client(), push_stale=lambda: None, pull_all=lambda: None,
                                     variables_list=lambda: [types.SimpleNamespace(_spec=spec)])
    return types.SimpleNamespace(extended=extended)


SPEC = OptimizerSpec(torch.optim.SGD, {"lr": 1.0}, [({"lr": 1.0, "momentum": 0.9}, [1])])


@pytest.fixture(autouse=True)
def _trained_ps():
    ps_service.reset()
    ps_service.create([(1, torch.zeros(3))])
    ps_service.apply_gradients(SPEC, {1: torch.ones(3)})
    yield
    ps_service.reset()


def _value():
    return ps_service.read([1])[0].clone()


def test_round_trip_restores_variables_and_momentum(tmp_path):
    ckpt = ParameterServerCheckpoint(_strategy(), tmp_path)
    ckpt.save(1)
    saved = _value()
    ps_service.apply_gradients(SPEC, {1: torch.ones(3)})
    assert ckpt.restore() == 1 and torch.equal(_value(), saved)
    ps_service.apply_gradients(SPEC, {1: torch.ones(3)})   # momentum carried over: -1 - (0.9 + 1)
    assert torch.allclose(_value(), torch.full((3,), -2.9))


def _edit_meta(path, **changes):
    meta_path = os.path.join(path, "checkpoint.json")
    with open(meta_path) as f:
        meta = json.load(f)
    meta["optimizers"][0].update(changes)
    with open(meta_path, "w") as f:
        json.dump(meta, f)


@pytest.mark.parametrize("module, name", [("builtins", "print"), ("os", "system"),
                                          ("torch.optim.optimizer", "Optimizer"), ("subprocess", "Popen")])
def test_only_allowed_optimizer_classes_are_restored(tmp_path, module, name, capsys):
    ckpt = ParameterServerCheckpoint(_strategy(), tmp_path)
    path = ckpt.save(1)
    _edit_meta(path, module=module, **{"class": name})
    before = _value()
    with pytest.raises(ValueError, match=rf"'{module}\.{name}'.*not allowed.*torch\.optim\.sgd\.SGD"):
        ckpt.restore()
    assert torch.equal(_value(), before) and capsys.readouterr().out == ""


def test_a_custom_optimizer_class_is_restored_when_passed(tmp_path):
    class MySGD(torch.optim.SGD):
        pass

    spec = OptimizerSpec(MySGD, {"lr": 1.0}, [({"lr": 1.0}, [1])])
    ps_service.apply_gradients(spec, {1: torch.ones(3)})
    path = ParameterServerCheckpoint(_strategy(), tmp_path).save(2)
    with pytest.raises(ValueError, match="MySGD"):
        ParameterServerCheckpoint(_strategy(), tmp_path).restore(path)
    assert ParameterServerCheckpoint(_strategy(), tmp_path, custom_optimizers=[MySGD]).restore(path) == 2
    with pytest.raises(TypeError, match="custom_optimizers"):
        ParameterServerCheckpoint(_strategy(), tmp_path, custom_optimizers=[print])


@pytest.mark.parametrize("name", ["variables.safetensors", "optimizers.safetensors"])
def test_bit_flip_is_named(tmp_path, name):
    ckpt = ParameterServerCheckpoint(_strategy(), tmp_path)
    file = os.path.join(ckpt.save(1), name)
    data = bytearray(open(file, "rb").read())
    data[-2] ^= 0x01
    open(file, "wb").write(bytes(data))
    with pytest.raises(md.errors.DataLossError, match="Checksum mismatch"):
        ckpt.restore()
    assert ParameterServerCheckpoint(_strategy(), tmp_path, verify_checksum=False).restore() == 1


def test_damaged_meta_is_named(tmp_path):
    ckpt = ParameterServerCheckpoint(_strategy(), tmp_path)
    path = ckpt.save(1)
    with open(os.path.join(path, "checkpoint.json"), "w") as f:
        json.dump({"step": 1, "num_ps": 1, "variables": [{"vid": 1}], "optimizers": []}, f)
    with pytest.raises(md.errors.DataLossError, match="is damaged: KeyError"):
        ckpt.restore()


def test_a_save_that_fails_at_the_swap_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = ParameterServerCheckpoint(_strategy(), tmp_path)
    ckpt.save(5)
    saved = _value()
    ps_service.apply_gradients(SPEC, {1: torch.ones(3)})
    real_rename = os.rename

    def crash_on_swap_in(src, dst):
        if ".tmp-" in os.fspath(src):
            raise OSError("injected crash")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", crash_on_swap_in)
    with pytest.raises(OSError, match="injected"):
        ckpt.save(5)            # same step: the old ckpt-5 is set aside, the new one fails to move in
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["ckpt-5"]
    assert ckpt.restore() == 5 and torch.equal(_value(), saved)
