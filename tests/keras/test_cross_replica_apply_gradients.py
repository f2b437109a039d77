"""``optimizer.apply_gradients`` outside ``strategy.run`` on a strategy's variables, as TensorFlow does it.

TensorFlow's "fault tolerance" migration guide trains a model with a ``GradientTape`` loop and no
``strategy.run``; built in a MirroredStrategy's scope, TF 2.21 applies the (whole batch's) gradients to
every copy and gives the one-device result (``tests/tutorials/migrate``); with Adam's slots and clipping too.
"""

import numpy as np
import pytest

import multidev as md


def _train(strategy, optimizer_fn, steps=3):
    rng = np.random.RandomState(0)
    x, y = rng.randn(8, 3).astype("float32"), rng.randn(8, 1).astype("float32")
    with strategy.scope() if strategy else md.distribute.get_strategy().scope():
        model = md.keras.Sequential([md.keras.layers.Dense(4, activation="tanh", input_shape=(3,)),
                                     md.keras.layers.Dense(1)])
        model.set_weights([np.full(w.shape, 0.1 * (i + 1), "float32") for i, w in enumerate(model.get_weights())])
        optimizer = optimizer_fn()
    for _ in range(steps):
        with md.GradientTape() as tape:
            loss = md.reduce_mean(md.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return model, optimizer


@pytest.mark.parametrize("optimizer_fn", [lambda: md.keras.optimizers.Adam(0.1, clipnorm=0.05),
                                          lambda: md.keras.optimizers.SGD(0.1, momentum=0.9)])
def test_cross_replica_update_equals_one_device_and_keeps_copies_equal(optimizer_fn):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, optimizer = _train(strategy, optimizer_fn)
    alone, _ = _train(None, optimizer_fn)
    assert int(optimizer.iterations) == 3
    for v, w in zip(model.trainable_variables, alone.get_weights()):
        copies = [c.detach().numpy() for c in strategy.experimental_local_results(v)]
        np.testing.assert_allclose(copies[0], w, rtol=1e-6, atol=1e-7)
        assert all(np.array_equal(c, copies[0]) for c in copies)
