"""Keras 3 models (torch backend) in MirroredStrategy's scope, trained with custom loops: N replicas == one device.

Two logical CPUs run the replicas; the reference trains the same model (same seed) on the same global
batches with no strategy. Every replica's copy must equal the reference (float reassociation of the
gradient sum across replicas is the only difference, hence the tolerances).
"""

from __future__ import annotations

import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]
GLOBAL_BATCH = 8


def _data(n=16, features=(3,), classes=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    if classes is None:
        x = torch.randn(n, *features, generator=g)
    else:
        x = torch.randint(0, classes, (n, *features), generator=g)
    return x, torch.randn(n, 1, generator=g)


def _dense():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])


def _functional_conv():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 6, 2))
    h = keras.layers.Conv2D(3, 3, activation="relu")(inputs)
    h = keras.layers.LayerNormalization()(keras.layers.Flatten()(h))
    return keras.Model(inputs, keras.layers.Dense(1)(h))


class _Recurrent(keras.Model):
    """Subclassed: Embedding -> LSTM -> Dense."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(10, 4)
        self.lstm = keras.layers.LSTM(5)
        self.out = keras.layers.Dense(1)

    def call(self, x):
        return self.out(self.lstm(self.embed(x)))


def _recurrent():
    keras.utils.set_random_seed(0)
    model = _Recurrent()
    model(torch.zeros(1, 4, dtype=torch.int64))  # creates the variables (in the scope when distributed)
    return model


def _torch_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).sum() / GLOBAL_BATCH  # per-example loss summed over the GLOBAL batch
    loss.backward()
    optimizer.step()


def _keras_step(model, optimizer, x, y):
    for v in model.trainable_variables:
        v.value.grad = None
    loss = ((model(x) - y) ** 2).sum() / GLOBAL_BATCH
    loss.backward()
    optimizer.apply([v.value.grad for v in model.trainable_variables], model.trainable_variables)


def _make_optimizer(kind, model):
    if kind == "torch":
        return torch.optim.Adam(model.parameters(), lr=0.05), _torch_step
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    optimizer.build(model.trainable_variables)
    return optimizer, _keras_step


def _train(build, kind, data, strategy=None, epochs=2):
    dataset = md.data.Dataset.from_tensor_slices(data).batch(GLOBAL_BATCH)
    if strategy is None:
        model = build()
        optimizer, step = _make_optimizer(kind, model)
        for _ in range(epochs):
            for x, y in dataset:
                step(model, optimizer, x, y)
        return model
    with strategy.scope():
        model = build()
        optimizer, step = _make_optimizer(kind, model)
    dist = strategy.experimental_distribute_dataset(dataset)
    for _ in range(epochs):
        for x, y in dist:
            strategy.run(step, (model, optimizer, x, y))
    return model


def _assert_replicas_match(reference, model):
    assert len(reference.weights) == len(model.weights)
    for ref, var in zip(reference.weights, model.weights):
        copies = var._value.values  # multidev's distributed variable behind the Keras variable
        assert len(copies) == len(DEVICES), var.path
        for r, copy in enumerate(copies):
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6,
                                       msg=lambda m, r=r, p=var.path: f"{p} replica {r}: {m}")


@pytest.mark.parametrize("kind", ["torch", "keras"])
@pytest.mark.parametrize("build,data", [
    (_dense, _data()),
    (_functional_conv, _data(features=(6, 6, 2))),
    (_recurrent, _data(features=(4,), classes=10)),
], ids=["sequential_dense", "functional_conv", "subclassed_lstm"])
def test_two_replicas_equal_one_device(build, data, kind):
    reference = _train(build, kind, data)
    model = _train(build, kind, data, md.distribute.MirroredStrategy(DEVICES))
    _assert_replicas_match(reference, model)


def test_weights_read_outside_run_and_written_everywhere():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _dense()
    kernel = model.layers[0].kernel
    kernel.assign(torch.ones(3, 4))  # cross-replica write reaches every copy
    ones = strategy.run(lambda: model.layers[0].kernel.value.detach().clone())
    for value in strategy.experimental_local_results(ones):
        torch.testing.assert_close(value, torch.ones(3, 4))
    x = torch.ones(2, 3)
    torch.testing.assert_close(model(x), strategy.run(model, (x,)).values[1])


def test_batch_normalization_statistics_are_per_replica_and_averaged_when_read():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.BatchNormalization(momentum=0.0)])
    x = torch.arange(24, dtype=torch.float32).reshape(8, 3)
    dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensors(x))
    for batch in dist:
        strategy.run(lambda b: model(b, training=True), (batch,))
    moving_mean = model.layers[0].moving_mean
    local = [c.detach() for c in moving_mean._value.values]
    torch.testing.assert_close(local[0], x[:4].mean(0))  # each replica's own batch statistics
    torch.testing.assert_close(local[1], x[4:].mean(0))
    torch.testing.assert_close(torch.as_tensor(moving_mean.numpy()), x.mean(0))  # read: their mean


def test_dropout_model_trains_and_replicas_stay_equal():
    def build():
        keras.utils.set_random_seed(0)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dropout(0.5),
                                 keras.layers.Dense(1)])

    def step(model, optimizer, x, y):
        optimizer.zero_grad()
        (((model(x, training=True) - y) ** 2).sum() / GLOBAL_BATCH).backward()
        optimizer.step()

    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [w.numpy().copy() for w in model.trainable_weights]
    for x, y in strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices(_data()).batch(8)):
        strategy.run(step, (model, optimizer, x, y))
    for w, old in zip(model.trainable_weights, before):
        a, b = w._value.values
        assert torch.equal(a, b), w.path
        assert not torch.equal(a.detach(), torch.as_tensor(old)), w.path


def test_keras_metrics_count_every_replica():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        mean = keras.metrics.Mean()
        accuracy = keras.metrics.SparseCategoricalAccuracy()
    values = torch.arange(10, dtype=torch.float32)
    labels = torch.tensor([0, 1, 1, 0, 1, 1, 1, 0, 0, 1])
    logits = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 0, 1, 1, 1, 1, 0, 1]), 2).float()
    data = md.data.Dataset.from_tensor_slices((values, labels, logits)).batch(5)  # uneven last split: 3 + 2

    def update(v, y, p):
        mean.update_state(v)
        accuracy.update_state(y, p)

    for v, y, p in strategy.experimental_distribute_dataset(data):
        strategy.run(update, (v, y, p))
    assert float(mean.result()) == pytest.approx(4.5)
    assert float(accuracy.result()) == pytest.approx(0.8)


def test_loss_scale_optimizer_two_replicas_equal_one_device():
    def make(model):
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.1))
        optimizer.build(model.trainable_variables)
        return optimizer

    def step(model, optimizer, x, y):
        for v in model.trainable_variables:
            v.value.grad = None
        optimizer.scale_loss(((model(x) - y) ** 2).sum() / GLOBAL_BATCH).backward()
        optimizer.apply([v.value.grad for v in model.trainable_variables], model.trainable_variables)

    x, y = _data()
    reference = _dense()
    ref_opt = make(reference)
    for i in range(0, 16, GLOBAL_BATCH):
        step(reference, ref_opt, x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH])
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _dense()
        optimizer = make(model)
    for xb, yb in strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(8)):
        strategy.run(step, (model, optimizer, xb, yb))
    _assert_replicas_match(reference, model)


def test_frozen_layer_is_not_trained_on_any_replica():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _dense()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.layers[0].trainable = False
    frozen = model.layers[0].kernel.numpy().copy()
    x, y = _data()
    for xb, yb in strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(8)):
        strategy.run(_torch_step, (model, optimizer, xb, yb))
    for copy in model.layers[0].kernel._value.values:
        assert torch.equal(copy.detach(), torch.as_tensor(frozen))
    trained = model.layers[1].kernel._value.values
    assert torch.equal(trained[0], trained[1])
    assert not torch.equal(trained[0].detach(), torch.as_tensor(_dense().layers[1].kernel.numpy()))
