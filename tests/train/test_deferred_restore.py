"""Deferred restoration: values land in variables created after ``restore`` (as TF's slots)."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from multidev import keras


def _model():
    return keras.Sequential([keras.layers.Dense(3), keras.layers.BatchNormalization(), keras.layers.Dense(1)])


def _step(model, opt, x, y):
    with md.GradientTape() as tape:
        loss = md.reduce_mean((model(x, training=True) - y) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return float(loss.detach())


def test_layers_built_after_restore_get_the_saved_weights_and_slots(tmp_path):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)
    model, opt = _model(), keras.optimizers.Adam(0.1)
    _step(model, opt, x, y)
    path = md.train.Checkpoint(model=model, optimizer=opt).save(str(tmp_path / "ckpt"))

    model2, opt2 = _model(), keras.optimizers.Adam(0.1)            # nothing built yet
    status = md.train.Checkpoint(model=model2, optimizer=opt2).restore(path)
    status.assert_existing_objects_matched()
    try:
        status.assert_consumed()
        raise RuntimeError("assert_consumed passed before the layers existed")
    except AssertionError as err:
        assert "waiting for objects not created yet" in str(err)
    assert int(opt2.iterations) == 1
    model2(x[:2])                                                  # builds: the kernels appear
    status.assert_consumed()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))
    assert _step(model, opt, x, y) == _step(model2, opt2, x, y)     # Adam moments restored too
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))


def test_attributes_assigned_after_restore_are_restored_on_assignment(tmp_path):
    prefix = md.train.Checkpoint(a=md.Variable(3.0), net=torch.nn.Linear(2, 2)).write(str(tmp_path / "w"))
    ckpt = md.train.Checkpoint()
    status = ckpt.read(prefix)
    with pytest.raises(AssertionError, match="Nothing in checkpoint"):
        status.assert_nontrivial_match()       # values are waiting, no object matched yet
    ckpt.a = md.Variable(0.0)
    assert float(ckpt.a) == 3.0
    status.assert_nontrivial_match()
    ckpt.net = torch.nn.Linear(2, 2)
    status.assert_consumed()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(1, 5)
        self.out = torch.nn.Linear(5, 1)


def test_parts_of_a_saved_model_restore_into_other_objects(tmp_path):
    net = _Net()
    path = md.train.Checkpoint(net=net).save(str(tmp_path / "ckpt"))
    # TF's "delayed restoration" example: one bias, reached through stand-in checkpoints.
    to_restore = md.Variable(torch.zeros(5))
    new_root = md.train.Checkpoint(net=md.train.Checkpoint(l1=md.train.Checkpoint(bias=to_restore)))
    status = new_root.restore(path)
    status.assert_existing_objects_matched()
    assert torch.equal(to_restore.detach(), net.l1.bias.detach())
    with pytest.raises(AssertionError, match="net:l1.weight"):
        status.assert_consumed()
    status.expect_partial()
    # A sub-module on its own (transfer learning: reuse one layer of a trained model).
    layer = torch.nn.Linear(1, 5)
    md.train.Checkpoint(net=md.train.Checkpoint(l1=layer)).restore(path).expect_partial() \
        .assert_existing_objects_matched()
    assert torch.equal(layer.weight, net.l1.weight) and torch.equal(layer.bias, net.l1.bias)
