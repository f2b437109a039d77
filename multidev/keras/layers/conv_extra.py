"""More Keras 3 convolutions, channels-last, in TF 2.21's weight layout and numbers:
Conv1DTranspose/Conv2DTranspose (kernel ``(*k, filters, in)``), DepthwiseConv1D/2D (kernel
``(*k, in, depth_multiplier)``), SeparableConv1D/2D (depthwise then pointwise kernel, then bias).

A transposed convolution is TF's: the adjoint of the strided convolution whose input has the output's
length (``deconv_output_length``), so with 'same' padding the cropped border follows TF's SAME rule.

Example:
    up = md.keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same")
    y = up(torch.zeros(2, 5, 5, 4))      # -> (2, 10, 10, 8)
"""

from __future__ import annotations

import torch.nn.functional as F

from multidev.keras import activations, initializers, regularizers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.conv import _PADDINGS, _tuple, conv_nd
from multidev.keras.layers.arg_checks import positive_int


def deconv_output_length(length, kernel, padding, output_padding, stride, dilation):
    """Keras's output length of a transposed convolution along one axis."""
    kernel = kernel + (kernel - 1) * (dilation - 1)
    if output_padding is None:
        return length * stride + max(kernel - stride, 0) if padding == "valid" else length * stride
    pad = kernel // 2 if padding == "same" else 0
    return (length - 1) * stride + kernel - 2 * pad + output_padding


class _Base(Layer):
    """Arguments shared by these convolutions (channels-last, rank 1 or 2)."""

    rank = 1

    def __init__(self, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1, activation=None,
                 use_bias=True, bias_initializer="zeros", bias_regularizer=None, activity_regularizer=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        padding = padding.lower() if isinstance(padding, str) else padding   # "VALID" as Keras 3 takes it
        if padding not in _PADDINGS[:2]:
            raise ValueError(f"Invalid padding {padding!r}. Valid values: ['valid', 'same'].")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.kernel_size = _tuple(kernel_size, self.rank, "kernel_size")
        self.strides = _tuple(strides, self.rank, "strides")
        self.dilation_rate = _tuple(dilation_rate, self.rank, "dilation_rate")
        self.padding, self.use_bias = padding, bool(use_bias)
        self.activation = activations.get(activation)
        self.bias_initializer = initializers.get(bias_initializer)
        self.bias_regularizer = regularizers.get(bias_regularizer)

    def _finish(self, out):
        if self.use_bias:
            out = out + self.bias.reshape(1, -1, *([1] * self.rank))
        return self.activation(out.movedim(1, -1))

    def get_config(self):
        return {**super().get_config(), "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                "padding": self.padding, "dilation_rate": list(self.dilation_rate),
                "activation": activations.serialize(self.activation), "use_bias": self.use_bias}


class _ConvTranspose(_Base):
    """Shared transposed convolution."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None, data_format=None,
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         bias_initializer, bias_regularizer, **kwargs)
        self.filters = positive_int("filters", filters)
        self.output_padding = None if output_padding is None else _tuple(output_padding, self.rank, "output_padding", 0)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)

    def build(self, input_shape):
        self.add_weight("kernel", self.kernel_size + (self.filters, input_shape[-1]), self.kernel_initializer,
                        regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, regularizer=self.bias_regularizer)

    def call(self, inputs):
        x = inputs.movedim(-1, 1)
        weight = self.kernel.permute(self.rank + 1, self.rank, *range(self.rank))   # (in, filters, *k)
        full = (F.conv_transpose1d if self.rank == 1 else F.conv_transpose2d)(
            x, weight, None, self.strides, 0, 0, 1, self.dilation_rate)
        for i in range(self.rank):   # crop/extend the full result to TF's window of each axis
            k, s = self.kernel_size[i], self.strides[i]
            length = deconv_output_length(x.shape[2 + i], k, self.padding,
                                          None if self.output_padding is None else self.output_padding[i],
                                          s, self.dilation_rate[i])
            before = 0
            if self.padding == "same":
                eff = (k - 1) * self.dilation_rate[i] + 1
                before = max((-(-length // s) - 1) * s + eff - length, 0) // 2
            full = full.narrow(2 + i, before, min(length, full.shape[2 + i] - before))
            if full.shape[2 + i] < length:
                pads = [0, 0] * (self.rank - 1 - i) + [0, length - full.shape[2 + i]]
                full = F.pad(full, pads)
        return self._finish(full)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters,
                "output_padding": None if self.output_padding is None else list(self.output_padding)}


class Conv1DTranspose(_ConvTranspose):
    """Transposed 1-D convolution; kernel (k, filters, in)."""

    rank = 1


class Conv2DTranspose(_ConvTranspose):
    """Transposed 2-D convolution; kernel (kh, kw, filters, in)."""

    rank = 2


class _Depthwise(_Base):
    """Depthwise convolution: each input channel convolved with ``depth_multiplier`` filters of its own."""

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         bias_initializer, bias_regularizer, **kwargs)
        self.depth_multiplier = positive_int("depth_multiplier", depth_multiplier)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer)

    def build(self, input_shape):
        channels = input_shape[-1]
        self.add_weight("kernel", self.kernel_size + (channels, self.depth_multiplier), self.depthwise_initializer,
                        regularizer=self.depthwise_regularizer)
        if self.use_bias:
            self.add_weight("bias", (channels * self.depth_multiplier,), self.bias_initializer,
                            regularizer=self.bias_regularizer)

    def call(self, inputs):
        return self._finish(_depthwise(self, inputs.movedim(-1, 1), self.kernel))

    def get_config(self):
        return {**super().get_config(), "depth_multiplier": self.depth_multiplier}


def _depthwise(layer, x, kernel):
    """Channels-first depthwise convolution; output channel ``c * multiplier + m`` (TF's order)."""
    channels, mult = kernel.shape[-2], kernel.shape[-1]
    weight = kernel.permute(layer.rank, layer.rank + 1, *range(layer.rank)).reshape(
        channels * mult, 1, *layer.kernel_size)
    return conv_nd(x, weight, None, layer.strides, layer.padding, layer.dilation_rate, channels, layer.kernel_size)


class DepthwiseConv1D(_Depthwise):
    """Depthwise 1-D convolution; kernel (k, in, depth_multiplier)."""

    rank = 1


class DepthwiseConv2D(_Depthwise):
    """Depthwise 2-D convolution; kernel (kh, kw, in, depth_multiplier)."""

    rank = 2


class _Separable(_Base):
    """Depthwise convolution, then a 1x1 convolution to ``filters`` channels, then the bias."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         bias_initializer, **kwargs)
        self.filters = positive_int("filters", filters)
        self.depth_multiplier = positive_int("depth_multiplier", depth_multiplier)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)

    def build(self, input_shape):
        channels = input_shape[-1]
        self.add_weight("depthwise_kernel", self.kernel_size + (channels, self.depth_multiplier),
                        self.depthwise_initializer)
        self.add_weight("pointwise_kernel", (1,) * self.rank + (channels * self.depth_multiplier, self.filters),
                        self.pointwise_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call(self, inputs):
        depth = _depthwise(self, inputs.movedim(-1, 1), self.depthwise_kernel)
        weight = self.pointwise_kernel.permute(self.rank + 1, self.rank, *range(self.rank))
        out = (F.conv1d if self.rank == 1 else F.conv2d)(depth, weight)
        return self._finish(out)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "depth_multiplier": self.depth_multiplier}


class SeparableConv1D(_Separable):
    """Separable 1-D convolution."""

    rank = 1


class SeparableConv2D(_Separable):
    """Separable 2-D convolution."""

    rank = 2


Convolution1DTranspose, Convolution2DTranspose = Conv1DTranspose, Conv2DTranspose
SeparableConvolution1D, SeparableConvolution2D = SeparableConv1D, SeparableConv2D
