"""``md.keras.random`` draws in a program's own code are TensorFlow's eager tensors, as ``md.keras.ops`` results are
(``EagerTensor``): keras.io's PixelCNN samples pixels with ``ops.ceil(probs - keras.random.uniform(probs.shape))``,
``probs`` a numpy row of ``predict``'s output (TypeError before: torch's operator refuses an ndarray on the left).
Inside a layer's call the draws stay plain torch tensors (the training hot path)."""

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras


def test_pixelcnn_sampling_line():
    K.utils.set_random_seed(3)
    pixels = np.zeros((4, 2, 2, 1))
    probs = np.array([0.0, 1.0, 0.25, 0.75], "float32")
    draw = K.random.uniform(probs.shape)
    K.utils.set_random_seed(3)
    pixels[:, 0, 1, 0] = K.ops.ceil(probs - K.random.uniform(probs.shape))
    np.testing.assert_array_equal(pixels[:, 0, 1, 0], np.ceil(probs - draw.numpy()))
    assert pixels[0, 0, 1, 0] == 0 and pixels[1, 0, 1, 0] == 1


@pytest.mark.parametrize("draw", [
    lambda: K.random.uniform((3,)), lambda: K.random.normal((3,), seed=1), lambda: K.random.truncated_normal((3,)),
    lambda: K.random.randint((3,), 0, 5), lambda: K.random.categorical(np.zeros((3, 2)), 1)[:, 0],
    lambda: K.random.shuffle(np.arange(3.0)), lambda: K.random.gamma((3,), 2.0), lambda: K.random.beta((3,), 2.0, 3.0),
    lambda: K.random.binomial((3,), 5, 0.5), lambda: K.random.dropout(np.ones(3, "float32"), 0.5, seed=2),
], ids=["uniform", "normal_seeded", "truncated_normal", "randint", "categorical", "shuffle", "gamma", "beta",
        "binomial", "dropout"])
def test_draws_take_numpy_and_list_operands(draw):
    out = draw()
    left = np.ones(3, dtype=out.numpy().dtype) - out            # numpy on the left, as TensorFlow converts it
    np.testing.assert_array_equal(np.asarray(left), 1 - out.numpy())
    np.testing.assert_array_equal(np.asarray([1, 1, 1] + out), 1 + out.numpy())   # a Python list too
    assert isinstance(K.random.uniform(()).numpy(), np.floating)   # a scalar's numpy() is a numpy scalar


def test_draws_inside_a_layer_stay_plain_tensors():
    seen = []

    class Noisy(K.layers.Layer):
        def call(self, x):
            noise = K.random.normal(K.ops.shape(x))
            seen.append(type(noise))
            return x + noise

    Noisy()(np.zeros((2, 3), "float32"))
    assert seen == [torch.Tensor]
