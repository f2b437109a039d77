"""Keras 3's own fit/evaluate/predict on a model compiled in MirroredStrategy's scope: 2 replicas == one device."""

from __future__ import annotations

import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]


def _compiled():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _data(n=21):  # 21 examples in batches of 8: an uneven last batch of 5 (3 + 2 on two replicas)
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, generator=g), torch.randint(0, 2, (n,), generator=g)


def test_fit_evaluate_predict_two_replicas_equal_one_device():
    x, y = _data()
    reference = _compiled()
    expected = reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                             validation_data=(x[:10], y[:10])).history
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _compiled()
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                        validation_data=(x[:10], y[:10])).history

    assert history.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(torch.tensor(history[key]), torch.tensor(expected[key]), rtol=1e-5, atol=1e-6)
    for ref, var in zip(reference.weights, model.weights):
        for copy in var._value.values:
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6)
    steps = [int(c) for c in model.optimizer.iterations._value.values]
    assert steps == [6, 6]  # both replicas applied every step (3 batches x 2 epochs)

    torch.testing.assert_close(torch.tensor(model.evaluate(x, y, batch_size=8, verbose=0)),
                               torch.tensor(reference.evaluate(x, y, batch_size=8, verbose=0)))
    predicted = model.predict(x, batch_size=8, verbose=0)
    assert predicted.shape == (21, 2)
    torch.testing.assert_close(torch.as_tensor(predicted), torch.as_tensor(reference.predict(x, batch_size=8, verbose=0)))


def test_callbacks_and_checkpoint_saved_on_two_replicas_load_on_one(tmp_path):
    x, y = _data(16)
    seen = []
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _compiled()
    callbacks = [keras.callbacks.ModelCheckpoint(tmp_path / "best.keras"),
                 keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: seen.append(logs["loss"]))]
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=callbacks)
    assert len(seen) == 2
    loaded = keras.saving.load_model(tmp_path / "best.keras")
    for var, other in zip(model.weights, loaded.weights):
        torch.testing.assert_close(torch.as_tensor(other.numpy()), var._value.values[1].detach())


def test_fit_with_batch_normalization_and_dropout_keeps_replicas_equal():
    x, y = _data(16)
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                                  keras.layers.Dropout(0.3), keras.layers.Dense(2)])
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    loss = model.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"]
    assert len(loss) == 2 and all(torch.isfinite(torch.tensor(loss)))
    for var in model.trainable_weights:
        first, second = var._value.values
        assert torch.equal(first, second), var.path
    mean = model.layers[1].moving_mean
    copies = [c.detach() for c in mean._value.values]
    assert not torch.equal(copies[0], copies[1])  # each replica's own batch statistics...
    torch.testing.assert_close(torch.as_tensor(mean.numpy()), (copies[0] + copies[1]) / 2)  # ...averaged when read
