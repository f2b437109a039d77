"""A model input one rank off its declared shape is conformed as tf.keras and Keras 3 conform it.

tensorflow.org's keras/regression tutorial fits and predicts
``Sequential([Normalization(input_shape=[1,], axis=None), Dense(units=1)])`` on a 1-D column
(``horsepower_model.predict(horsepower[:10])``); multidev refused the (10,) input against (None, 1).
What TF 2.21 does (tf.keras 2 and Keras 3 alike) was observed with /work/tfvenv.
"""

import numpy as np
import pytest
import torch

import multidev as md

L = md.keras.layers


def _ones(*shape):
    return np.ones(shape, "float32")


@pytest.mark.parametrize("input_shape, given, out", [
    ([1], (5,), (5, 2)),          # one rank short, last dim 1: the axis is added
    ([1], (5, 1, 1), (5, 2)),     # one rank over, last dim 1: squeezed
    ([3], (5, 3, 1), (5, 2)),
    ([2, 1], (5, 2), (5, 2, 2)),
])
def test_sequential_with_an_input_shape_conforms_the_rank(input_shape, given, out):
    model = md.keras.Sequential([L.Dense(2, input_shape=input_shape)])
    assert tuple(model(_ones(*given)).shape) == out
    assert model.predict(_ones(*given), verbose=0).shape == out


def test_functional_model_conforms_the_rank():
    inp = md.keras.Input(shape=(1,))
    model = md.keras.Model(inp, L.Dense(2)(inp))
    assert tuple(model(_ones(5)).shape) == (5, 2)


def test_other_ranks_are_still_refused():
    model = md.keras.Sequential([L.Dense(2, input_shape=[3])])
    with pytest.raises(ValueError, match=r"expected shape=\(None, 3\), found shape=\(3,\)"):
        model(_ones(3))
    with pytest.raises(ValueError, match="min_ndim=2"):   # no declared input: the Dense layer's own check
        md.keras.Sequential([L.Dense(1)])(_ones(5))


def test_regression_tutorials_horsepower_model_fits_a_1d_column_as_a_column():
    x = np.linspace(50, 200, 16).astype("float32")
    y = (40 - 0.15 * x).astype("float32")
    norm = L.Normalization(input_shape=[1, ], axis=None)
    norm.adapt(x)
    model = md.keras.Sequential([norm, L.Dense(units=1)])
    model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss='mean_absolute_error')
    model.set_weights(model.get_weights()[:2] + [np.full((1, 1), 0.5, "float32"), np.zeros(1, "float32")])
    loss = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0).history["loss"]
    column = model.predict(x[:, None], verbose=0)
    np.testing.assert_array_equal(model.predict(x, verbose=0), column)
    # the 1-D labels against (16, 1) predictions: Keras's MAE squeezes, no (16, 16) broadcast
    z = (x - x.mean()) / x.std()
    np.testing.assert_allclose(loss[0], np.mean(np.abs(y - 0.5 * z)), rtol=1e-5)
    assert torch.is_tensor(model(x))
