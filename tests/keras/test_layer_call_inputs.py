"""A layer's inputs passed by the name of its call()'s first parameter (the transformer tutorial's
``self.causal_self_attention(x=x)`` and ``self.cross_attention(x=x, context=context)``), as Keras takes them."""

import numpy as np
import pytest
import torch

import multidev as md


class Scale(md.keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1],), initializer="ones")

    def call(self, x, context=None):
        return x * self.w + (0.0 if context is None else context)


class Residual(md.keras.layers.Layer):
    """Calls its sublayer by keyword, as the tutorial's DecoderLayer does."""
    def __init__(self):
        super().__init__()
        self.inner = Scale()

    def call(self, x, context):
        return self.inner(x=x, context=context)


def test_first_argument_by_its_call_name_builds_and_runs():
    x = torch.arange(6.0).reshape(2, 3)
    layer = Scale()
    out = layer(x=x)                                   # the first call builds from x
    assert layer.built and layer.w.shape == (3,)
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    np.testing.assert_array_equal(layer(x=x, context=1.0).numpy(), x.numpy() + 1)   # a second call
    np.testing.assert_array_equal(layer(inputs=x).numpy(), x.numpy())                 # Keras's name always works
    np.testing.assert_array_equal(Residual()(x, context=x).numpy(), 2 * x.numpy())


def test_first_argument_by_name_keeps_the_mask_and_the_training_flag():
    emb = md.keras.layers.Embedding(5, 3, mask_zero=True)
    ids = md.constant([[1, 2, 0]])
    out = md.keras.layers.LayerNormalization()(inputs=emb(ids))
    assert out._keras_mask.tolist() == [[True, True, False]]
    drop = md.keras.layers.Dropout(0.5)
    ones = torch.ones(4, 8)
    assert torch.equal(drop(inputs=ones, training=False), ones)


def test_multi_head_attention_by_keyword_equals_positional():
    mha = md.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    q, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    by_position = mha(q, v)
    torch.testing.assert_close(mha(query=q, value=v, key=v), by_position)


def test_no_inputs_at_all_says_which_name_the_layer_takes():
    with pytest.raises(ValueError, match=r"first parameter \('x'\); got only keyword arguments \['context'\]"):
        Scale()(context=1.0)
