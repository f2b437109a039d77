"""A functional (or ``Input``-declared Sequential) model called on inputs one rank off its ``Input`` where the
difference is a trailing 1, as Keras 3 (``Functional._adjust_input_rank``) and tf.keras 2 take them: keras.io's 3D
image classification predicts ``model.predict(np.expand_dims(x_val[0], axis=0))`` of a (1, W, H, D) volume on
``Input((W, H, D, 1))`` (ValueError "is incompatible with the layer" before); a (N, 1) column fed to ``Input((3,
1))``-less models is squeezed alike. Other rank differences are still refused."""

import numpy as np
import pytest

import multidev as md

K = md.keras


def _functional():
    K.utils.set_random_seed(0)
    inputs = K.Input((4, 3, 1))
    x = K.layers.Conv2D(2, 2, activation="relu")(inputs)
    return K.Model(inputs, K.layers.Dense(1)(K.layers.Flatten()(x)))


def _sequential():
    K.utils.set_random_seed(0)
    return K.Sequential([K.Input((4, 3, 1)), K.layers.Conv2D(2, 2, activation="relu"), K.layers.Flatten(),
                         K.layers.Dense(1)])


@pytest.mark.parametrize("make", [_functional, _sequential], ids=["functional", "sequential"])
def test_missing_trailing_one_is_added(make):
    model = make()
    x = np.random.RandomState(1).rand(6, 4, 3).astype("float32")
    want = model.predict(x[..., None], verbose=0)
    np.testing.assert_array_equal(model.predict(x, verbose=0), want)
    np.testing.assert_array_equal(model.predict(np.expand_dims(x[0], axis=0), verbose=0), want[:1])
    np.testing.assert_array_equal(np.asarray(model(x)), want)


@pytest.mark.parametrize("make", [_functional, _sequential], ids=["functional", "sequential"])
def test_fit_on_volumes_without_the_channel_equals_fit_with_it(make):
    x = np.random.RandomState(1).rand(8, 4, 3).astype("float32")
    y = np.arange(8, dtype="float32")
    losses = []
    for data in (x[..., None], x):
        model = make()
        model.compile(optimizer="adam", loss="mse")
        losses.append(model.fit(data, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"])
    assert losses[0] == losses[1]


def test_extra_trailing_one_is_squeezed():
    K.utils.set_random_seed(0)
    inputs = K.Input((3,))
    model = K.Model(inputs, K.layers.Dense(2)(inputs))
    x = np.random.RandomState(2).rand(5, 3).astype("float32")
    np.testing.assert_array_equal(model.predict(x[..., None], verbose=0), model.predict(x, verbose=0))


def test_one_of_two_inputs_adjusted():
    K.utils.set_random_seed(0)
    a, b = K.Input((2, 1), name="a"), K.Input((3,), name="b")
    model = K.Model([a, b], K.layers.Concatenate()([K.layers.Flatten()(a), b]))
    out = model.predict([np.ones((2, 2), "float32"), np.zeros((2, 3), "float32")], verbose=0)
    assert out.shape == (2, 5)


@pytest.mark.parametrize("shape", [(2, 4), (2, 4, 3, 1, 1, 1), (2, 4, 3, 2, 1)], ids=["two_short", "two_long",
                                                                                 "other_dims"])
def test_other_ranks_are_refused(shape):
    with pytest.raises(ValueError, match=r"incompatible with the layer: expected shape=\(None, 4, 3, 1\)"):
        _functional().predict(np.zeros(shape, "float32"), verbose=0)


def test_last_dim_not_one_is_refused():
    K.utils.set_random_seed(0)
    inputs = K.Input((4, 3))
    model = K.Model(inputs, K.layers.Dense(1)(inputs))
    with pytest.raises(ValueError, match="incompatible with the layer"):
        model.predict(np.zeros((2, 4), "float32"), verbose=0)
