"""Keras 3's mean losses in a custom loop's ``strategy.run`` are divided by the replica count, as Keras 3 on
TensorFlow's strategies divides them (tensorflow 2.21, Keras 3.15.1: ``CategoricalCrossentropy(from_logits=True)``
of one-hot [1, 2, 3, 4] over 5 classes against zero logits is 1.6094 on one device, 0.8047 on each of 2 replicas),
so keras.io's torch custom loop, distributed with ``strategy.run``, trains as one device does."""

from __future__ import annotations

import math

import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]


def test_a_mean_loss_in_a_replica_is_its_share_as_on_tensorflow():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        mean_loss = keras.losses.CategoricalCrossentropy(from_logits=True)
        sum_loss = keras.losses.CategoricalCrossentropy(from_logits=True, reduction="sum")
    y = torch.nn.functional.one_hot(torch.tensor([1, 2, 3, 4]), 5).float()
    logits = torch.zeros(4, 5)
    assert float(mean_loss(y, logits)) == pytest.approx(math.log(5))   # outside run: Keras's own mean
    data = md.data.Dataset.from_tensor_slices((y, logits)).batch(4)
    for a, b in strategy.experimental_distribute_dataset(data):
        means = strategy.experimental_local_results(strategy.run(mean_loss, (a, b)))
        sums = strategy.experimental_local_results(strategy.run(sum_loss, (a, b)))
    assert [float(v) for v in means] == pytest.approx([math.log(5) / 2] * 2)
    assert [float(v) for v in sums] == pytest.approx([2 * math.log(5)] * 2)   # a sum is not scaled


def _model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(4)(keras.layers.Dense(8, activation="relu")(inputs))
    return keras.Model(inputs, outputs)


def _data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(24, 6, generator=g)
    y = torch.nn.functional.one_hot(torch.randint(0, 4, (24,), generator=g), 4).float()
    return md.data.Dataset.from_tensor_slices((x, y)).batch(8)


def _train(kind, strategy):
    """keras.io's loop: a mean Keras loss, ``model.zero_grad()``, ``loss.backward()``, then a Keras or a torch
    optimizer (SGD: the gradient's scale changes the weights, as Adam's would not)."""
    with strategy.scope():
        model = _model()
        loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)
        optimizer = (keras.optimizers.SGD(learning_rate=0.5) if kind == "keras"
                     else torch.optim.SGD(model.parameters(), lr=0.5))

    def step(x, y):
        loss = loss_fn(y, model(x))
        model.zero_grad()
        loss.backward()
        if kind == "keras":
            with torch.no_grad():
                optimizer.apply([v.value.grad for v in model.trainable_weights], model.trainable_weights)
        else:
            optimizer.step()
        return loss.detach()

    losses = [float(strategy.reduce("SUM", strategy.run(step, batch), axis=None))
              for _ in range(2) for batch in strategy.experimental_distribute_dataset(_data())]
    return losses, [w.numpy() for w in model.trainable_weights]


@pytest.mark.parametrize("kind", ["keras", "torch"])
def test_keras_io_custom_loop_with_a_mean_loss_equals_one_device(kind):
    one_losses, one_weights = _train(kind, md.distribute.get_strategy())
    two_losses, two_weights = _train(kind, md.distribute.MirroredStrategy(DEVICES))
    assert two_losses == pytest.approx(one_losses, rel=1e-5)   # the replicas' shares sum to the global mean
    for a, b in zip(two_weights, one_weights):
        torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), rtol=1e-5, atol=1e-6)
