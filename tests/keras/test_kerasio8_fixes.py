"""What keras.io's programs p84+ needed of md.keras, through the public API: ``predict`` of a model whose
outputs nest (keras.io's involution ``vis_model``: a list of the ``(output, kernel)`` pairs its layers return)."""

from __future__ import annotations

import numpy as np

import multidev as md

K = md.keras


class _Pair(K.layers.Layer):
    """A layer returning two tensors, as keras.io's Involution returns ``(output, kernel)``."""

    def call(self, x):
        return x * 2.0, K.ops.sum(x, axis=-1)


def _pairs_model():
    inputs = K.Input((3,))
    first = _Pair(name="first")(inputs)
    second = _Pair(name="second")(first[0])
    model = K.Model(inputs, [K.layers.Dense(2)(second[0])])
    return K.Model(model.input, [model.get_layer(name).output for name in ("first", "second")])


def test_predict_keeps_nested_outputs_and_concatenates_each_leaf_over_batches():
    x = np.arange(15, dtype="float32").reshape(5, 3)
    (a, b), (c, d) = _pairs_model().predict(x, batch_size=2, verbose=0)   # 3 batches: 2 + 2 + 1
    np.testing.assert_allclose(a, 2 * x)
    np.testing.assert_allclose(b, x.sum(-1))
    np.testing.assert_allclose(c, 4 * x)
    np.testing.assert_allclose(d, 2 * x.sum(-1))


def test_predict_of_one_example_unpacks_as_the_example_does():
    x = np.ones((1, 3), "float32")   # keras.io's `vis_model.predict(test_image[None, ...])`
    (inv1_out, inv2_out) = _pairs_model().predict(x, verbose=0)
    _, kernel = inv2_out
    assert kernel.shape == (1,) and float(kernel[0]) == 6.0
    outputs = _pairs_model().predict_on_batch(x)
    assert [o.shape for o in outputs[0]] == [(1, 3), (1,)]
