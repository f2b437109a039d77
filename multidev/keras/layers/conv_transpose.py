"""Conv2DTranspose (channels-last), as Keras computes it: TensorFlow's output shapes and windows.

The kernel is stored in Keras's layout ``(kh, kw, filters, in_channels)`` so ``get_weights`` matches Keras.
torch's ``conv_transpose2d`` pads symmetrically, which cannot express "same" with a stride and an odd kernel;
so the full transposed convolution is computed (no padding) and cropped per side as TensorFlow's
``conv2d_transpose`` (the gradient of a "same"/"valid" ``Conv2D``) does: "same" gives ``input * stride``,
"valid" ``(input - 1) * stride + max(kernel, stride)``; where the kernel is shorter than the stride the right
side is extended with zeros. The bias is added afterwards, as Keras adds it. (keras.io's VAE and DCGAN use it.)

Example:
    up = md.keras.layers.Conv2DTranspose(32, 3, strides=2, padding="same", activation="relu")
    y = up(torch.zeros(8, 7, 7, 64))     # -> (8, 14, 14, 32)
"""

from __future__ import annotations

import torch.nn.functional as F

from multidev.keras import activations, initializers, regularizers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.conv import _tuple
from multidev.keras.layers.input_spec import InputSpec


class Conv2DTranspose(Layer):
    """Transposed 2-D convolution over (batch, height, width, channels); kernel (kh, kw, filters, in)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding {padding!r}. Valid values: ['valid', 'same'].")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        if output_padding is not None:
            raise NotImplementedError(f"Conv2DTranspose(output_padding={output_padding!r}) is not supported by "
                                      "md.keras; leave it None, or use Keras 3 on multidev (KERAS_BACKEND=torch).")
        self.filters, self.padding, self.use_bias = int(filters), padding, use_bias
        self.kernel_size = _tuple(kernel_size, 2, "kernel_size")
        self.strides = _tuple(strides, 2, "strides")
        self.dilation_rate = _tuple(dilation_rate, 2, "dilation_rate")
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.input_spec = InputSpec(ndim=4)

    def build(self, input_shape):
        channels = input_shape[-1]
        self.add_weight("kernel", self.kernel_size + (self.filters, channels), self.kernel_initializer,
                        regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer, regularizer=self.bias_regularizer)
        self.input_spec = InputSpec(ndim=4, axes={-1: channels})

    def call(self, inputs):
        x = inputs.movedim(-1, 1)                                    # channels-last -> channels-first
        weight = self.kernel.permute(3, 2, 0, 1)                     # (in, filters, kh, kw): torch's layout
        out = F.conv_transpose2d(x, weight, None, self.strides, 0, 0, 1, self.dilation_rate)
        pads = []
        for axis in (1, 0):                                          # F.pad lists the last dimension first
            size, stride = x.shape[2 + axis], self.strides[axis]
            kernel = (self.kernel_size[axis] - 1) * self.dilation_rate[axis] + 1
            total = max(kernel - stride, 0) if self.padding == "same" else 0
            left = total // 2
            extend = max(stride - kernel, 0)                         # a kernel shorter than the stride
            pads += [-left, -(total - left) + extend]
        out = F.pad(out, pads)
        if self.use_bias:
            out = out + self.bias.view(1, -1, 1, 1)
        return self.activation(out.movedim(1, -1))

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": list(self.kernel_size),
                "strides": list(self.strides), "padding": self.padding, "output_padding": None,
                "dilation_rate": list(self.dilation_rate), "activation": activations.serialize(self.activation),
                "use_bias": self.use_bias, "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer),
                "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": regularizers.serialize(self.bias_regularizer)}


Convolution2DTranspose = Conv2DTranspose
