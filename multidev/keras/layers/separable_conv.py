"""SeparableConv2D (channels-last): a depthwise convolution per input channel, then a 1x1 pointwise one,
as Keras computes it (keras.io's image classification from scratch uses it).

Kernels are stored in Keras's layouts, ``depthwise_kernel`` ``(kh, kw, in, depth_multiplier)`` and
``pointwise_kernel`` ``(1, 1, in * depth_multiplier, filters)``, so ``get_weights`` matches Keras.

Example:
    sep = md.keras.layers.SeparableConv2D(64, 3, padding="same", activation="relu")
    y = sep(torch.zeros(8, 32, 32, 16))   # -> (8, 32, 32, 64)
"""

from __future__ import annotations

import torch.nn.functional as F

from multidev.keras import activations, initializers, regularizers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.conv import _tuple, pad_same_strided
from multidev.keras.layers.input_spec import InputSpec


class SeparableConv2D(Layer):
    """Depthwise-separable 2-D convolution over (batch, height, width, channels)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding {padding!r}. Valid values: ['valid', 'same'].")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.filters, self.padding, self.use_bias = int(filters), padding, use_bias
        self.depth_multiplier = int(depth_multiplier)
        self.kernel_size = _tuple(kernel_size, 2, "kernel_size")
        self.strides = _tuple(strides, 2, "strides")
        self.dilation_rate = _tuple(dilation_rate, 2, "dilation_rate")
        self.activation = activations.get(activation)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer)
        self.pointwise_regularizer = regularizers.get(pointwise_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.input_spec = InputSpec(ndim=4)

    def build(self, input_shape):
        channels = input_shape[-1]
        self.add_weight("depthwise_kernel", self.kernel_size + (channels, self.depth_multiplier),
                        self.depthwise_initializer, regularizer=self.depthwise_regularizer)
        self.add_weight("pointwise_kernel", (1, 1, channels * self.depth_multiplier, self.filters),
                        self.pointwise_initializer, regularizer=self.pointwise_regularizer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, regularizer=self.bias_regularizer)
        self.input_spec = InputSpec(ndim=4, axes={-1: channels})

    def call(self, inputs):
        x = inputs.movedim(-1, 1)                                   # channels-last -> channels-first
        channels = x.shape[1]
        kh, kw = self.kernel_size
        depthwise = self.depthwise_kernel.permute(2, 3, 0, 1).reshape(channels * self.depth_multiplier, 1, kh, kw)
        padding = self.padding
        if padding == "same" and any(s > 1 for s in self.strides):
            x, padding = pad_same_strided(x, self.kernel_size, self.strides, self.dilation_rate), "valid"
        x = F.conv2d(x, depthwise, None, self.strides, padding, self.dilation_rate, channels)
        pointwise = self.pointwise_kernel.permute(3, 2, 0, 1)       # (filters, in * multiplier, 1, 1)
        out = F.conv2d(x, pointwise, self.bias if self.use_bias else None)
        return self.activation(out.movedim(1, -1))

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": list(self.kernel_size),
                "strides": list(self.strides), "padding": self.padding, "dilation_rate": list(self.dilation_rate),
                "depth_multiplier": self.depth_multiplier, "activation": activations.serialize(self.activation),
                "use_bias": self.use_bias,
                "depthwise_initializer": initializers.serialize(self.depthwise_initializer),
                "pointwise_initializer": initializers.serialize(self.pointwise_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "depthwise_regularizer": regularizers.serialize(self.depthwise_regularizer),
                "pointwise_regularizer": regularizers.serialize(self.pointwise_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}


SeparableConvolution2D = SeparableConv2D
