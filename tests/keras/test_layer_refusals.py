"""Where md.keras cannot compute TF 2.21's numbers with torch, it refuses and says why, instead of
silently training differently (the rest is checked number by number in test_layer_numerics.py)."""

import pytest
import torch

import multidev as md

layers = md.keras.layers


@pytest.mark.parametrize("make, error, match", [
    (lambda: layers.BatchNormalization(renorm=True), NotImplementedError, "renorm=True"),
    (lambda: layers.UpSampling2D(interpolation="bicubic"), NotImplementedError, "bicubic"),
    (lambda: layers.Resizing(4, 4, interpolation="bicubic"), NotImplementedError, "bicubic"),
    (lambda: layers.Resizing(4, 4, pad_to_aspect_ratio=True), NotImplementedError, "pad_to_aspect_ratio"),
    (lambda: layers.Conv2D(2, 3, data_format="channels_first"), ValueError, "channels_last"),
    (lambda: layers.Conv2DTranspose(2, 3, data_format="channels_first"), ValueError, "channels_last"),
    (lambda: layers.GlobalAveragePooling2D(data_format="channels_first"), ValueError, "channels_last"),
    (lambda: layers.MaxPooling3D(data_format="channels_first"), ValueError, "channels_last"),
    (lambda: layers.Conv1DTranspose(2, 3, padding="causal"), ValueError, "Valid values"),
    (lambda: layers.Attention(score_mode="general"), ValueError, "score_mode"),
    (lambda: layers.Dot(axes="last"), TypeError, "axes"),
    (lambda: layers.Permute((1, 3)), ValueError, "consecutive"),
    (lambda: md.keras.initializers.VarianceScaling(distribution="cauchy"), ValueError, "untruncated_normal"),
    (lambda: md.keras.activations.gelu(torch.ones(2), approximate="tanh"), TypeError, "approximate"),
])
def test_unsupported_options_refuse_with_a_reason(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_center_crop_of_a_smaller_image_refuses():
    with pytest.raises(NotImplementedError, match="smart_resize"):
        layers.CenterCrop(5, 5)(torch.zeros(1, 4, 6, 1))


def test_new_layers_round_trip_their_config():
    """A model saved with them rebuilds them (get_config -> from_config), with the same outputs."""
    x = torch.randn(2, 4, 6, 3)
    for layer in (layers.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1),
                  layers.SeparableConv2D(4, 2, depth_multiplier=2), layers.DepthwiseConv2D(3, padding="same"),
                  layers.ZeroPadding2D(((1, 0), (2, 1))), layers.UpSampling2D(2, interpolation="bilinear"),
                  layers.Resizing(3, 3, crop_to_aspect_ratio=True), layers.GroupNormalization(groups=3)):
        twin = type(layer).from_config(layer.get_config())
        out = layer(x)
        twin(x)
        twin.set_weights(layer.get_weights())
        torch.testing.assert_close(twin(x), out)
