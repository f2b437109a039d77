"""A bool tensor fed to a model whose ``Input`` is floating is cast to it, as Keras casts a model's inputs
(keras.io's character-level text generation trains an LSTM on bool one-hot windows); ids stay as they are."""

import numpy as np
import torch

import multidev as md

K = md.keras


def _one_hot(rng):
    x = np.zeros((4, 5, 3), dtype="bool")
    x[np.arange(4)[:, None], np.arange(5), rng.randint(0, 3, (4, 5))] = True
    return x


def test_sequential_and_functional_cast_bool_to_the_inputs_float_dtype():
    rng = np.random.RandomState(0)
    x = _one_hot(rng)
    K.utils.set_random_seed(0)
    seq = K.Sequential([K.Input((5, 3)), K.layers.LSTM(4), K.layers.Dense(2)])
    inputs = K.Input((5, 3))
    fun = K.Model(inputs, K.layers.Dense(2)(K.layers.LSTM(4)(inputs)))
    for model in (seq, fun):
        got = model(torch.from_numpy(x))
        torch.testing.assert_close(got, model(torch.from_numpy(x.astype("float32"))))
        np.testing.assert_allclose(model.predict(x, verbose=0), got.detach().numpy(), rtol=1e-6, atol=1e-6)
        model.compile("sgd", "mse")
        assert np.isfinite(model.fit(x, np.zeros((4, 2), "float32"), verbose=0).history["loss"][0])


def test_integer_ids_reach_an_embedding_unchanged():
    inputs = K.Input((3,), dtype="int64")
    model = K.Model(inputs, K.layers.Embedding(10, 2)(inputs))
    assert tuple(model(torch.tensor([[1, 2, 9]])).shape) == (1, 3, 2)
