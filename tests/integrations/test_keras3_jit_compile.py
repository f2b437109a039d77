"""Keras 3 ``model.compile(jit_compile=True)`` in MirroredStrategy's scope: Keras's torch backend would run
its step through ``torch.compile``; multidev's step functions run each replica eagerly instead, which
it says in a warning naming the call, and training equals one device's. (Keras's own compiled step on
one device gives the eager losses too, but compiling it with inductor takes a minute on 2 cores.)"""

from __future__ import annotations

import warnings

import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()


def _compiled(jit_compile):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), jit_compile=jit_compile,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_jit_compile_on_a_strategy_warns_and_trains_as_one_device():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 3, generator=g), torch.randint(0, 2, (16,), generator=g)
    reference = _compiled(False)
    expected = reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = _compiled(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        model.evaluate(x, y, batch_size=8, verbose=0)
    messages = [str(w.message) for w in caught if "jit_compile=True" in str(w.message)]
    assert [m.split("(")[0] for m in messages] == ["model.fit", "model.evaluate"], messages
    assert "runs each replica's step eagerly" in messages[0] and "jit_compile=False" in messages[0]
    assert all(w.filename == __file__ for w in caught if "jit_compile=True" in str(w.message))
    torch.testing.assert_close(torch.tensor(history), torch.tensor(expected), rtol=1e-6, atol=1e-7)
    for ref, var in zip(reference.weights, model.weights):
        for copy in var._value.values:
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6)

    with strategy.scope():
        plain = _compiled(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert not [w for w in caught if "jit_compile" in str(w.message)]
