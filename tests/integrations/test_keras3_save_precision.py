"""Keras 3 models distributed by MirroredStrategy: Keras saving (2 replicas -> one device) and mixed precision."""

from __future__ import annotations

import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                             keras.layers.Dense(1)])


def _train_a_little(strategy, model):
    with strategy.scope():
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        optimizer.zero_grad()
        (((model(x, training=True) - y) ** 2).sum() / 8).backward()
        optimizer.step()

    g = torch.Generator().manual_seed(3)
    data = md.data.Dataset.from_tensor_slices((torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)))
    for x, y in strategy.experimental_distribute_dataset(data.batch(8)):
        strategy.run(step, (x, y))


def test_saved_on_two_replicas_loads_on_one_and_back(tmp_path):
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _model()
    _train_a_little(strategy, model)
    model.save_weights(tmp_path / "w.weights.h5")
    model.save(tmp_path / "m.keras")
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(4))
    expected = model(x).detach()  # cross-replica call: the weights as saved (BatchNorm: averaged statistics)

    one = _model(seed=1)
    one.load_weights(tmp_path / "w.weights.h5")
    torch.testing.assert_close(one(x).detach(), expected)
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    torch.testing.assert_close(loaded(x).detach(), expected)

    with strategy.scope():
        again = _model(seed=2)
    again.load_weights(tmp_path / "w.weights.h5")  # loading under the strategy writes every copy
    for var in again.weights:
        first, second = var._value.values
        assert torch.equal(first, second), var.path
    for out in strategy.experimental_local_results(strategy.run(again, (x,))):
        torch.testing.assert_close(out.detach(), expected)


def test_mixed_precision_two_replicas_equal_one_device():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        def build():
            keras.utils.set_random_seed(0)
            return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                                     keras.layers.Dense(1, dtype="float32")])

        def step(model, optimizer, x, y):
            optimizer.zero_grad()
            (((model(x) - y) ** 2).sum() / 8).backward()
            optimizer.step()

        g = torch.Generator().manual_seed(5)
        data = md.data.Dataset.from_tensor_slices((torch.randn(16, 3, generator=g), torch.randn(16, 1, generator=g)))
        reference = build()
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        for x, y in data.batch(8):
            step(reference, ref_opt, x, y)
        strategy = md.distribute.MirroredStrategy(DEVICES)
        with strategy.scope():
            model = build()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        assert model(torch.ones(1, 3)).dtype == torch.float32  # float32 head; hidden layer computes in bf16
        assert strategy.run(lambda: model.layers[0](torch.ones(1, 3))).values[1].dtype == torch.bfloat16
        for x, y in strategy.experimental_distribute_dataset(data.batch(8)):
            strategy.run(step, (model, optimizer, x, y))
        for ref, var in zip(reference.weights, model.weights):
            assert var._value.dtype == torch.float32  # variables stay float32
            first, second = var._value.values
            assert torch.equal(first, second), var.path
            # bf16 forward on half batches vs the whole batch: bf16 rounding, not float32's
            torch.testing.assert_close(first.detach(), ref.value.detach(), rtol=2e-2, atol=2e-3)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_mixed_float16_fit_with_loss_scaling_two_replicas_equal_one_device():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        def build():
            keras.utils.set_random_seed(0)
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                                      keras.layers.Dense(2, dtype="float32")])
            model.compile(optimizer=keras.optimizers.SGD(0.1),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            return model

        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(16, 3, generator=g), torch.randint(0, 2, (16,), generator=g)
        reference = build()
        expected = reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        with md.distribute.MirroredStrategy(DEVICES).scope():
            model = build()
        assert type(model.optimizer).__name__ == "LossScaleOptimizer"
        loss = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        # float16 forward on half batches vs whole batches: float16 rounding, not float32's
        torch.testing.assert_close(torch.tensor(loss), torch.tensor(expected), rtol=1e-3, atol=1e-4)
        for ref, var in zip(reference.weights, model.weights):
            first, second = var._value.values
            assert torch.equal(first, second), var.path
            torch.testing.assert_close(first.detach(), ref.value.detach(), rtol=1e-2, atol=2e-4)
    finally:
        keras.mixed_precision.set_global_policy("float32")
