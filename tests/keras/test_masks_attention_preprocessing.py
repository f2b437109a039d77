"""Keras masks (Embedding mask_zero, Masking, propagation), MultiHeadAttention, and the preprocessing
layers the tutorials use (Rescaling, Normalization, RandomFlip, RandomRotation)."""

import math

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, models


def test_padded_lstm_equals_the_unpadded_sequences():
    torch.manual_seed(0)
    embed, lstm = layers.Embedding(10, 4, mask_zero=True), layers.LSTM(3, return_sequences=True)
    padded = torch.tensor([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]])
    out = lstm(embed(padded))
    torch.testing.assert_close(out[0, :3], lstm(embed(padded[:1, :3]))[0])
    torch.testing.assert_close(out[1, 0], lstm(embed(padded[1:, :1]))[0, 0])
    torch.testing.assert_close(out[0, 4], out[0, 2])  # a masked step repeats the last output, as Keras
    assert out._keras_mask.tolist() == (padded != 0).tolist()  # return_sequences passes the mask on
    last = layers.LSTM(3)
    assert not hasattr(last(embed(padded)), "_keras_mask")


def test_masking_layer_and_masked_average_pooling():
    x = torch.tensor([[[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]])
    masked = layers.Masking(mask_value=0.0)(x)
    assert masked._keras_mask.tolist() == [[True, False, True]]
    dense = layers.Dense(2, use_bias=False)
    dense(masked)
    with torch.no_grad():
        dense.kernel.copy_(torch.eye(2))
    pooled = layers.GlobalAveragePooling1D()(dense(masked))
    torch.testing.assert_close(pooled, torch.tensor([[2.0, 3.0]]))  # the mask passed through Dense


def test_sequential_with_mask_zero_trains_equal_on_two_replicas():
    ids = torch.tensor([[3, 5, 0, 0], [2, 0, 0, 0], [7, 8, 9, 1], [4, 4, 0, 0]] * 4)
    y = torch.tensor([0, 1, 1, 0] * 4)

    def train(strategy):
        with strategy.scope():
            torch.manual_seed(1)
            model = models.Sequential([layers.Embedding(10, 4, mask_zero=True), layers.LSTM(3),
                                       layers.Dense(2, activation="softmax")])
            model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        model.fit(ids, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return model.get_weights()

    one = train(md.distribute.OneDeviceStrategy("/cpu:0"))
    two = train(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    for a, b in zip(two, one):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _reference_attention(mha, q, v, mask=None):
    """Multi-head attention written out with the layer's weights (Keras's formula)."""
    def project(x, name):
        return torch.einsum("btd,dnh->btnh", x, getattr(mha, f"{name}_kernel")) + getattr(mha, f"{name}_bias")
    qh, kh, vh = project(q, "query") / math.sqrt(mha.key_dim), project(v, "key"), project(v, "value")
    scores = torch.einsum("btnh,bsnh->bnts", qh, kh)
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    probs = scores.softmax(-1)
    out = torch.einsum("bnts,bsnh->btnh", probs, vh)
    return torch.einsum("btnh,nhd->btd", out, mha.output_kernel) + mha.output_bias, probs


def test_multi_head_attention_matches_the_formula_with_masks_and_causality():
    torch.manual_seed(0)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=3, bias_initializer="glorot_uniform")
    q, v = torch.randn(2, 4, 5), torch.randn(2, 6, 7)
    out, scores = mha(q, v, return_attention_scores=True)
    want, want_scores = _reference_attention(mha, q, v)
    assert out.shape == (2, 4, 5) and scores.shape == (2, 2, 4, 6)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(scores, want_scores)
    allowed = torch.rand(2, 4, 6) > 0.3
    allowed[..., 0] = True
    torch.testing.assert_close(mha(q, v, attention_mask=allowed), _reference_attention(mha, q, v, allowed)[0])
    x = torch.randn(1, 4, 5)
    self_mha = layers.MultiHeadAttention(num_heads=1, key_dim=2)
    causal = self_mha(x, x, use_causal_mask=True)
    torch.testing.assert_close(causal[:, :2], self_mha(x[:, :2], x[:, :2], use_causal_mask=True))  # no peeking


def test_attention_to_padding_is_masked_by_the_values_keras_mask():
    torch.manual_seed(0)
    embed = layers.Embedding(20, 6, mask_zero=True)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    ids = torch.tensor([[5, 6, 7, 0, 0]])
    x = embed(ids)
    out = mha(x, x)
    short = embed(ids[:, :3])
    torch.testing.assert_close(out[:, :3], mha(short, short))
    assert out._keras_mask.tolist() == [[True, True, True, False, False]]


def test_functional_attention_model_round_trips_through_save(tmp_path):
    inputs = md.keras.Input((5, 8))
    x = layers.MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    x = layers.LayerNormalization()(layers.Add()([x, inputs]))
    outputs = layers.Dense(2)(layers.GlobalAveragePooling1D()(x))
    model = md.keras.Model(inputs, outputs)
    data = torch.randn(3, 5, 8)
    model.save(str(tmp_path / "attn"))
    restored = models.load_model(str(tmp_path / "attn"))
    torch.testing.assert_close(restored(data), model(data))


def test_rescaling_and_normalization_adapt_invert_and_save(tmp_path):
    data = np.random.RandomState(0).normal(3.0, 2.0, size=(200, 4)).astype("float32")
    norm = layers.Normalization()
    norm.adapt(data)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0, keepdims=True)[0], rtol=1e-5)
    np.testing.assert_allclose(norm.variance.numpy(), data.var(0), rtol=1e-4)
    out = norm(torch.as_tensor(data))
    np.testing.assert_allclose(out.mean(0).numpy(), 0, atol=1e-5)
    back = layers.Normalization(mean=data.mean(0), variance=data.var(0), invert=True)
    torch.testing.assert_close(back(out), torch.as_tensor(data), rtol=1e-4, atol=1e-4)
    scale = layers.Rescaling(1 / 255, offset=-1)
    torch.testing.assert_close(scale(torch.tensor([[0, 255]], dtype=torch.uint8)), torch.tensor([[-1.0, 0.0]]))
    model = models.Sequential([md.keras.Input((4,)), layers.Rescaling(0.5), norm, layers.Dense(1)])
    model.save(str(tmp_path / "prep"))
    restored = models.load_model(str(tmp_path / "prep"))
    torch.testing.assert_close(restored(torch.as_tensor(data)), model(torch.as_tensor(data)))


def test_random_flip_and_rotation_only_while_training():
    images = torch.arange(2 * 4 * 4 * 1, dtype=torch.float32).reshape(2, 4, 4, 1)
    flip = layers.RandomFlip("horizontal", seed=0)
    assert torch.equal(flip(images), images)
    flipped = flip(images, training=True)
    for got, original in zip(flipped, images):
        assert torch.equal(got, original) or torch.equal(got, original.flip(1))
    rotate = layers.RandomRotation((0.25, 0.25), interpolation="nearest", seed=0)
    assert torch.equal(rotate(images), images)
    quarter = rotate(images, training=True)
    rotated = torch.rot90(images, k=1, dims=(1, 2))  # a quarter turn counter-clockwise in (row, col)
    assert torch.equal(quarter, rotated) or torch.equal(quarter, torch.rot90(images, k=-1, dims=(1, 2)))
    with pytest.raises(ValueError, match="'diagonal'"):
        layers.RandomFlip("diagonal")
