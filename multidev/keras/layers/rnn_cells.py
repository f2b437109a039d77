"""Keras 3's RNN cells: ``SimpleRNNCell``, ``LSTMCell``, ``GRUCell`` (one timestep; ``layers.RNN`` loops).

Weights have Keras's names, shapes and gate orders (LSTM i, f, c, o; GRU z, r, h with
``reset_after=True``), so weights set from Keras give Keras's numbers. ``call(inputs, states)``
returns ``(output, new_states)`` as a custom cell's does.

Example:
    layer = md.keras.layers.RNN(md.keras.layers.LSTMCell(8), return_sequences=True)
"""

from __future__ import annotations

import torch

from multidev.keras import activations, initializers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.arg_checks import positive_int


class _Cell(Layer):
    """Shared arguments and weights: ``kernel`` (in, gates*units), ``recurrent_kernel``, ``bias``."""

    gates = 1

    def __init__(self, units, activation="tanh", use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", dropout=0.0, recurrent_dropout=0.0,
                 **kwargs):
        super().__init__(**kwargs)
        if dropout or recurrent_dropout:
            raise ValueError(f"{type(self).__name__}: dropout and recurrent_dropout are not supported by md.keras's "
                             f"cells (received dropout={dropout!r}, recurrent_dropout={recurrent_dropout!r}).")
        self.units, self.use_bias = positive_int("units", units), use_bias
        self.activation = activations.get(activation)
        self._activation_name = activation
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)

    def _bias_shape(self):
        return (self.gates * self.units,)

    def build(self, input_shape):
        add_gate_weights(self, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "units": self.units, "use_bias": self.use_bias,
                "activation": self._activation_name if isinstance(self._activation_name, str) else None,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer)}


def add_gate_weights(layer, input_dim: int) -> None:
    """A recurrent layer's or cell's weights in Keras's order and shapes: ``kernel`` (input_dim, gates *
    units), ``recurrent_kernel`` (units, gates * units), ``bias`` (``layer._bias_shape()``)."""
    n = layer.gates * layer.units
    layer.add_weight("kernel", (input_dim, n), layer.kernel_initializer)
    layer.add_weight("recurrent_kernel", (layer.units, n), layer.recurrent_initializer)
    if layer.use_bias:
        layer.add_weight("bias", layer._bias_shape(), layer.bias_initializer)


class SimpleRNNCell(_Cell):
    """``h = activation(x @ kernel + bias + h_prev @ recurrent_kernel)``."""

    @property
    def state_size(self):
        return self.units

    def call(self, inputs, states):
        prev = states[0] if isinstance(states, (list, tuple)) else states
        h = inputs @ self.kernel
        if self.use_bias:
            h = h + self.bias
        output = self.activation(h + prev @ self.recurrent_kernel)
        return output, [output]


class LSTMCell(_Cell):
    """Keras's LSTM step; ``unit_forget_bias`` starts the forget-gate bias at 1."""

    gates = 4

    def __init__(self, units, recurrent_activation="sigmoid", unit_forget_bias=True, **kwargs):
        super().__init__(units, **kwargs)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.unit_forget_bias = unit_forget_bias

    @property
    def state_size(self):
        return [self.units, self.units]

    def build(self, input_shape):
        super().build(input_shape)
        if self.use_bias and self.unit_forget_bias:
            with torch.no_grad():
                self.bias[self.units:2 * self.units] = 1.0

    def call(self, inputs, states):
        h_prev, c_prev = states[0], states[1]
        z = inputs @ self.kernel + h_prev @ self.recurrent_kernel
        if self.use_bias:
            z = z + self.bias
        i, f, c, o = torch.chunk(z, 4, dim=-1)
        i, f, o = self.recurrent_activation(i), self.recurrent_activation(f), self.recurrent_activation(o)
        c = f * c_prev + i * self.activation(c)
        h = o * self.activation(c)
        return h, [h, c]


class GRUCell(_Cell):
    """Keras's GRU step with ``reset_after=True`` (bias (2, 3*units): input and recurrent halves)."""

    gates = 3

    def __init__(self, units, recurrent_activation="sigmoid", reset_after=True, **kwargs):
        if not reset_after:
            raise ValueError("GRUCell(reset_after=False) is not supported by md.keras; use reset_after=True.")
        super().__init__(units, **kwargs)
        self.recurrent_activation = activations.get(recurrent_activation)

    @property
    def state_size(self):
        return self.units

    def _bias_shape(self):
        return (2, 3 * self.units)

    def call(self, inputs, states):
        h_prev = states[0] if isinstance(states, (list, tuple)) else states
        x = inputs @ self.kernel
        r = h_prev @ self.recurrent_kernel
        if self.use_bias:
            x, r = x + self.bias[0], r + self.bias[1]
        x_z, x_r, x_h = torch.chunk(x, 3, dim=-1)
        r_z, r_r, r_h = torch.chunk(r, 3, dim=-1)
        z = self.recurrent_activation(x_z + r_z)
        reset = self.recurrent_activation(x_r + r_r)
        hh = self.activation(x_h + reset * r_h)
        h = z * h_prev + (1 - z) * hh
        return h, [h]
