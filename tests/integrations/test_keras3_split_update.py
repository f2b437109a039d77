"""Keras 3 optimizers on 2 logical CPUs: the owner-split update (each variable summed and updated once,
by its owner, values and optimizer slots copied to the other replica) equals one device, every copy."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from multidev.distribute import replica_update
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]
BATCH = 8


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(6, activation="relu"),
                             keras.layers.Dense(3, kernel_constraint=keras.constraints.MaxNorm(1.5)),
                             keras.layers.Dense(1)])


def _data(n=24):
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 5, generator=g), torch.randn(n, 1, generator=g)


def _step(model, optimizer, x, y):
    for v in model.trainable_variables:
        v.value.grad = None
    loss = ((model(x) - y) ** 2).sum() / BATCH
    loss.backward()
    optimizer.apply([v.value.grad for v in model.trainable_variables], model.trainable_variables)


def _train(make_optimizer, strategy=None):
    dataset = md.data.Dataset.from_tensor_slices(_data()).batch(BATCH)
    scope = strategy.scope() if strategy is not None else md.distribute.get_strategy().scope()
    with scope:
        model = _model()
        optimizer = make_optimizer()
        optimizer.build(model.trainable_variables)
    for _ in range(2):
        if strategy is None:
            for x, y in dataset:
                _step(model, optimizer, x, y)
        else:
            for x, y in strategy.experimental_distribute_dataset(dataset):
                strategy.run(_step, (model, optimizer, x, y))
    return model, optimizer


def _copies(variable):
    value = variable._value  # multidev's distributed variable behind the Keras variable
    return value.values if hasattr(value, "values") else (value,)


def _assert_equal(reference, distributed):
    assert len(reference) == len(distributed)
    for ref, var in zip(reference, distributed):
        for r, copy in enumerate(_copies(var)):
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6,
                                       msg=lambda m, r=r, p=var.path: f"{p} replica {r}: {m}")


OPTIMIZERS = {
    "sgd_momentum_nesterov": lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    "adamw_clipnorm": lambda: keras.optimizers.AdamW(0.02, weight_decay=0.01, clipnorm=0.5),
    "nadam": lambda: keras.optimizers.Nadam(0.02),
    "rmsprop_centered": lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    "adam_amsgrad": lambda: keras.optimizers.Adam(0.02, amsgrad=True),
    "global_clipnorm_all_reduce": lambda: keras.optimizers.Adam(0.02, global_clipnorm=0.3),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_two_replicas_equal_one_device_weights_and_optimizer_state(name, monkeypatch):
    published = []
    original = replica_update.SplitPlan._copy_out
    monkeypatch.setattr(replica_update.SplitPlan, "_copy_out", lambda plan, r: (published.append(r), original(plan, r)))
    reference, ref_optimizer = _train(OPTIMIZERS[name])
    model, optimizer = _train(OPTIMIZERS[name], md.distribute.MirroredStrategy(DEVICES))
    _assert_equal(reference.weights, model.weights)
    _assert_equal(ref_optimizer.variables, optimizer.variables)  # slots mirrored: every copy is one device's
    for ref, var in zip(ref_optimizer.variables, optimizer.variables):  # what saving reads
        torch.testing.assert_close(torch.as_tensor(var.numpy()), torch.as_tensor(ref.numpy()), rtol=1e-5, atol=1e-6)
    split = name != "global_clipnorm_all_reduce"  # a global norm needs every gradient: the all-reduce path
    assert sorted(set(published)) == ([0, 1] if split else [])
    assert len(published) == (2 * 6 if split else 0)  # 3 batches x 2 epochs, once per replica
