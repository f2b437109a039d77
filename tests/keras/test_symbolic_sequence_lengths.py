"""Functional graphs over an unknown sequence length (keras.io's neural machine translation, p20):
a position Embedding over ``ops.arange(length)``, a Sequential first called inside a layer, a layer
called with a second positional KerasTensor, ``ops.tile`` with tensor repeats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import multidev as md

keras = md.keras
L, ops = keras.layers, keras.ops


class PositionalEmbedding(L.Layer):
    """keras.io's: token embedding plus an embedding of each position (at most ``sequence_length``)."""

    def __init__(self, sequence_length, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_embeddings = L.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.position_embeddings = L.Embedding(input_dim=sequence_length, output_dim=embed_dim)

    def call(self, inputs):
        positions = ops.arange(0, ops.shape(inputs)[-1], 1)
        return self.token_embeddings(inputs) + self.position_embeddings(positions)


def test_position_embedding_over_an_unknown_length_builds_and_runs_every_length():
    inputs = keras.Input(shape=(None,), dtype="int64")
    layer = PositionalEmbedding(6, 10, 4)
    model = keras.Model(inputs, layer(inputs))
    assert model.output.shape == (None, None, 4)
    for length in (6, 3, 1):
        ids = np.arange(2 * length).reshape(2, length) % 10
        expected = (layer.token_embeddings.embeddings[torch.as_tensor(ids)]
                    + layer.position_embeddings.embeddings[:length]).detach().numpy()
        np.testing.assert_allclose(model.predict(ids, verbose=0), expected, rtol=1e-6)
    with pytest.raises(ValueError, match=r"input id 6 is out of range for Embedding\(input_dim=6\)"):
        model.predict(np.zeros((2, 7), "int64"), verbose=0)   # longer than the table: the real call refuses


def test_a_layer_that_refuses_every_length_raises_its_own_first_error():
    class Broken(L.Layer):
        def call(self, inputs):
            raise ValueError(f"broken at length {inputs.shape[1]}")

    with pytest.raises(ValueError, match="broken at length 24"):
        Broken()(keras.Input(shape=(None, 3)))


def test_sequential_built_by_a_call_accepts_other_lengths_as_tf_keras_does():
    seq = keras.Sequential([L.Dense(4)])
    assert tuple(seq(np.zeros((2, 24, 8), "float32")).shape) == (2, 24, 4)
    assert tuple(seq(np.zeros((3, 25, 8), "float32")).shape) == (3, 25, 4)
    assert seq.get_config()["input_shape"] == [None, None, 8]   # tf.keras: input_shape (None, None, 8)
    with pytest.raises(ValueError, match=r"expected shape=\(None, None, 8\), found shape=\(3, 8\)"):
        seq(np.zeros((3, 8), "float32"))                     # the rank stays fixed
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 8"):
        seq(np.zeros((3, 25, 9), "float32"))
    declared = keras.Sequential([keras.Input((24, 8)), L.Dense(4)])
    with pytest.raises(ValueError, match=r"expected shape=\(None, 24, 8\), found shape=\(3, 25, 8\)"):
        declared(np.zeros((3, 25, 8), "float32"))


class Attend(L.Layer):
    """A decoder-like layer: ``call(inputs, context)`` with the context as a second positional argument."""

    def call(self, inputs, context, scale=1.0):
        return inputs * scale + ops.mean(context, axis=1, keepdims=True)


def test_a_second_positional_keras_tensor_is_a_graph_input():
    x, c = keras.Input(shape=(None, 3)), keras.Input(shape=(None, 3))
    model = keras.Model([x, c], Attend()(x, c, 2.0))
    assert model.output.shape == (None, None, 3)
    a, b = np.ones((2, 4, 3), "float32"), np.arange(30, dtype="float32").reshape(2, 5, 3)
    np.testing.assert_allclose(model.predict([a, b], verbose=0), 2 * a + b.mean(axis=1, keepdims=True), rtol=1e-6)


def test_extra_positional_arguments_call_cannot_name_are_refused_with_the_fix():
    class Star(L.Layer):
        def call(self, inputs, *more):
            return inputs

    with pytest.raises(TypeError, match=r"Pass them by keyword"):
        Star()(keras.Input(shape=(3,)), keras.Input(shape=(3,)))


@pytest.mark.parametrize("repeats", [torch.tensor([2, 1, 3]), np.array([2, 1, 3]), [2, 1, 3], (2, 1, 3)])
def test_tile_takes_repeats_as_a_tensor_as_keras_causal_masks_build_them(repeats):
    x = np.arange(6, dtype="float32").reshape(1, 2, 3)
    np.testing.assert_array_equal(ops.tile(torch.from_numpy(x), repeats).numpy(), np.tile(x, (2, 1, 3)))


def test_tile_of_a_batch_size_tensor_concatenated_with_ones():
    """keras.io's get_causal_attention_mask: ``mult = concatenate([expand_dims(batch_size, -1), [1, 1]])``."""
    mask = torch.ones(1, 3, 3, dtype=torch.int32)
    batch_size = ops.shape(torch.zeros(4, 3))[0]
    mult = ops.concatenate([ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], axis=0)
    assert tuple(ops.tile(mask, mult).shape) == (4, 3, 3)
