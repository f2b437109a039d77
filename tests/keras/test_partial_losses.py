"""A model with several outputs compiled with losses for some of them and fit on one target: keras.io's
miniature GPT compiles ``loss=[loss_fn, None]`` (no loss on its embeddings output) and fits a single ``y``;
Keras 3 matches the targets with the non-None losses in order and logs only ``loss``
(tests/programs/keras/p48 runs the example on 2 replicas)."""

import numpy as np
import pytest

import multidev as md

K = md.keras


def _model(losses, metrics=None):
    K.utils.set_random_seed(0)
    inputs = K.Input((3,))
    hidden = K.layers.Dense(4, activation="tanh", name="hidden")(inputs)
    model = K.Model(inputs, [K.layers.Dense(1, name="head")(hidden), hidden])
    model.compile(optimizer="sgd", loss=losses, metrics=metrics)
    return model


def _data():
    rng = np.random.RandomState(0)
    return rng.random((16, 3)).astype("float32"), rng.random((16, 1)).astype("float32")


def test_one_target_goes_to_the_one_output_with_a_loss():
    x, y = _data()
    model = _model(["mse", None], metrics=[["mae"], []])
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0).history
    assert sorted(history) == ["head_mae", "loss"]                  # no per-output losses for one loss
    head, _ = model.predict(x, verbose=0)
    loss, mae = model.evaluate(x, y, batch_size=16, verbose=0)
    assert loss == pytest.approx(float(np.mean((head - y) ** 2)), rel=1e-5)
    assert mae == pytest.approx(float(np.mean(np.abs(head - y))), rel=1e-5)


def test_a_single_target_for_two_losses_is_refused():
    x, y = _data()
    model = _model(["mse", "mse"])
    with pytest.raises(ValueError, match="2 of which take a target .* but 1 target"):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)   # before: y's rows were taken as the two targets


def test_two_losses_log_each_outputs_loss():
    x, y = _data()
    model = _model(["mse", "mse"])
    history = model.fit(x, [y, np.zeros((16, 4), "float32")], batch_size=8, epochs=1, verbose=0).history
    assert sorted(history) == ["head_loss", "hidden_loss", "loss"]
