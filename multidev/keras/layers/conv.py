"""Convolution layers, channels-last: Conv1D (batch, steps, channels), Conv2D (batch, h, w, channels), Conv3D.

Kernels are stored in Keras layout ``(*kernel_size, in_channels, filters)`` so ``get_weights``
matches Keras; the call permutes to torch's layout and uses ``torch.nn.functional.conv*d``.

Example:
    conv = md.keras.layers.Conv1D(64, 5, activation="relu")
    y = conv(torch.zeros(8, 300, 7))     # -> (8, 296, 64)
"""

from __future__ import annotations

import numbers

import torch.nn.functional as F

from multidev.keras import activations, initializers, regularizers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.arg_checks import positive_int

_PADDINGS = ("valid", "same", "causal")


def _tuple(value, rank, what, minimum=1):
    """``value`` (an int or ``rank`` ints, each >= ``minimum``) as a tuple of ``rank`` ints."""
    received = value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,) * rank
    try:
        value = tuple(int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v for v in value)
    except TypeError:
        value = None
    if value is None or len(value) != rank or not all(isinstance(v, int) and v >= minimum for v in value):
        kind = "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"The `{what}` argument must be an integer or a tuple of {rank} {kind} integers. "
                         f"Received: {what}={received!r}")
    return value


def _pad_same_strided(x, kernel_size, strides, dilation_rate):
    """TF's SAME padding for strided convolutions: the odd extra row/column goes at the end."""
    pads = []
    for i in reversed(range(len(kernel_size))):
        size = x.shape[2 + i]
        eff = (kernel_size[i] - 1) * dilation_rate[i] + 1
        out = -(-size // strides[i])
        total = max((out - 1) * strides[i] + eff - size, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads)


def conv_nd(x, weight, bias, strides, padding, dilation_rate, groups, kernel_size):
    """TF's N-d convolution (valid, same, causal) of channels-first ``x`` with a torch-layout ``weight``."""
    if padding == "causal":
        x, padding = F.pad(x, (dilation_rate[0] * (kernel_size[0] - 1), 0)), "valid"
    if padding == "same" and any(s > 1 for s in strides):
        x, padding = _pad_same_strided(x, kernel_size, strides, dilation_rate), "valid"
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(kernel_size)]
    return conv(x, weight, bias, strides, padding, dilation_rate, groups)


class _Conv(Layer):
    """Shared N-d convolution (N = 1, 2 or 3) over channels-last inputs."""

    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, dilation_rate=1,
                 groups=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        padding = padding.lower() if isinstance(padding, str) else padding   # "VALID" as Keras 3 takes it
        if padding not in _PADDINGS or (padding == "causal" and self.rank != 1):
            raise ValueError(f"Invalid padding {padding!r}. Valid values: {list(_PADDINGS[:3 if self.rank == 1 else 2])}.")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.filters, self.groups, self.padding, self.use_bias = positive_int("filters", filters), groups, padding, use_bias
        self.kernel_size = _tuple(kernel_size, self.rank, "kernel_size")
        self.strides = _tuple(strides, self.rank, "strides")
        self.dilation_rate = _tuple(dilation_rate, self.rank, "dilation_rate")
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels % self.groups:
            raise ValueError(f"The number of input channels ({channels}) must be divisible by groups={self.groups}.")
        self.add_weight("kernel", self.kernel_size + (channels // self.groups, self.filters), self.kernel_initializer,
                        regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, regularizer=self.bias_regularizer)
        self.input_spec = InputSpec(ndim=self.rank + 2, axes={-1: channels})

    def call(self, inputs):
        weight = self.kernel.permute(self.rank + 1, self.rank, *range(self.rank))
        out = conv_nd(inputs.movedim(-1, 1), weight, self.bias if self.use_bias else None, self.strides,
                      self.padding, self.dilation_rate, self.groups, self.kernel_size)
        return self.activation(out.movedim(1, -1))

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": list(self.kernel_size),
                "strides": list(self.strides), "padding": self.padding, "dilation_rate": list(self.dilation_rate),
                "groups": self.groups, "activation": activations.serialize(self.activation), "use_bias": self.use_bias,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}


class Conv1D(_Conv):
    """1-D convolution over (batch, steps, channels); kernel (kernel_size, in, filters)."""

    rank = 1


class Conv2D(_Conv):
    """2-D convolution over (batch, height, width, channels); kernel (kh, kw, in, filters)."""

    rank = 2


class Conv3D(_Conv):
    """3-D convolution over (batch, depth, height, width, channels); kernel (kd, kh, kw, in, filters)."""

    rank = 3


Convolution1D = Conv1D
Convolution2D = Conv2D
Convolution3D = Conv3D
