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


def test_summary_of_an_unbuilt_sequential_prints_its_layers_as_keras_3():
    # keras.io's semi-supervised SimCLR calls `self.encoder.summary()` in __init__, before any input: Keras 3 prints
    # the layers with unknown shapes and "0 (unbuilt)" parameters; md.keras raised "not yet been built"
    encoder = K.Sequential([K.layers.Conv2D(4, 3), K.layers.Flatten(), K.layers.Dense(2)], name="encoder")
    lines = []
    encoder.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Model: "encoder"' in text and "Total params: 0" in text
    for name in ("Conv2D", "Flatten", "Dense"):
        row = next(line for line in lines if f"({name})" in line)
        assert "?" in row and "0 (unbuilt)" in row, row
    assert not encoder.built
    encoder.build((None, 6, 6, 1))   # and once built, the counts
    lines.clear()
    encoder.summary(print_fn=lines.append)
    assert f"Total params: {encoder.count_params():,}" in "\n".join(lines) and encoder.count_params() > 0
