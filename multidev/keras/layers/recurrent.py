"""Recurrent layers LSTM and GRU (torch's fused RNN kernels) and the Bidirectional wrapper.

Weights use Keras names and layouts (``kernel`` (in, k*units), ``recurrent_kernel``, ``bias``) and
are handed to torch's RNN kernel on every call (no cached weight list, so replica-aware
parameters work). LSTM gate order (i, f, c, o) is torch's; GRU columns are kept in Keras's
(z, r, h) order and permuted to torch's (r, z, n) per call; GRU uses ``reset_after=True``.

Example:
    seq, h, c = md.keras.layers.LSTM(16, return_sequences=True, return_state=True)(x)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import _VF

from multidev.keras import activations, batch_draw, initializers
from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.rnn_cells import add_gate_weights
from multidev.keras.layers.rnn_state import StatefulLayerMixin, StatefulStates
from multidev.keras.layers.arg_checks import positive_int


class _RNN(StatefulLayerMixin, Layer):
    """Shared single-layer RNN over (batch, timesteps, features)."""

    gates = 4

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 dropout=0.0, recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        if activations.get(activation) is not torch.tanh or activations.get(recurrent_activation) not in (torch.sigmoid, activations.sigmoid):
            raise ValueError(f"{type(self).__name__} runs torch's fused kernel, which needs activation='tanh' and "
                             f"recurrent_activation='sigmoid'. Received: {activation!r}, {recurrent_activation!r}")
        if recurrent_dropout:
            raise ValueError(f"{type(self).__name__}: recurrent_dropout is not supported by torch's fused kernel "
                             f"(received recurrent_dropout={recurrent_dropout!r}); use dropout= instead.")
        self.units, self.use_bias, self.dropout = positive_int("units", units), use_bias, float(dropout)
        self.return_sequences, self.return_state, self.go_backwards = return_sequences, return_state, go_backwards
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.stateful = bool(stateful)
        self._carried = StatefulStates(self.name) if stateful else None
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape):
        add_gate_weights(self, input_shape[-1])
        self.input_spec = InputSpec(ndim=3, axes={-1: input_shape[-1]})

    def _bias_shape(self):
        return (self.gates * self.units,)

    def call(self, inputs, initial_state=None, training=False, mask=None):
        x = inputs.flip(1) if self.go_backwards else inputs
        if training and self.dropout:
            # one mask per example for every step (Keras's); in a step on replicas one device's, each its rows
            drop = batch_draw.dropout(x.new_ones(x.shape[0], 1, x.shape[2]), self.dropout, training=True)
            x = x * drop
        if self._carried is not None and initial_state is None:
            states = [s.unsqueeze(0) for s in self._carried.initial(
                x.shape[0], lambda: [z[0] for z in self._initial_states(x, None)])]
        else:
            states = self._initial_states(x, initial_state)
        if mask is None:
            seq, final = self._run(x, states)
        else:
            seq, final = self._run_masked(x, states, mask.flip(1) if self.go_backwards else mask)
        if self._carried is not None:
            self._carried.remember(final)
        out = seq if self.return_sequences else seq[:, -1]
        return [out, *final] if self.return_state else out

    def _run_masked(self, x, states, mask):
        """Step by step (Keras's masked RNN): a masked step keeps the states and repeats the last output
        (zeros with ``zero_output_for_mask``, which Bidirectional sets when returning sequences)."""
        outputs, prev = [], x.new_zeros(x.shape[0], self.units)
        for t in range(x.shape[1]):
            step, new = self._run(x[:, t:t + 1], states)
            keep = mask[:, t].unsqueeze(-1)
            prev = torch.where(keep, step[:, 0], prev)
            states = [torch.where(keep, n, s[0]).unsqueeze(0) for n, s in zip(new, states)]
            outputs.append(torch.where(keep, prev, torch.zeros_like(prev)) if self.zero_output_for_mask else prev)
        return torch.stack(outputs, dim=1), [s[0] for s in states]


    def _initial_states(self, x, initial_state):
        n = len(self._state_names())
        if initial_state is None:
            zero = x.new_zeros(1, x.shape[0], self.units)
            return [zero] * n
        initial_state = initial_state if isinstance(initial_state, (list, tuple)) else [initial_state]
        if len(initial_state) != n:
            raise ValueError(f'Layer "{self.name}" expects {n} initial state(s) {self._state_names()}, received {len(initial_state)}.')
        return [s.unsqueeze(0) for s in initial_state]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "use_bias": self.use_bias, "dropout": self.dropout,
                "return_sequences": self.return_sequences, "return_state": self.return_state,
                "go_backwards": self.go_backwards, "stateful": self.stateful, "zero_output_for_mask": self.zero_output_for_mask,
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
                "bias_initializer": initializers.serialize(self.bias_initializer)}


class LSTM(_RNN):
    """Long short-term memory; ``unit_forget_bias`` starts the forget-gate bias at 1 as Keras does."""

    gates = 4

    def __init__(self, units, unit_forget_bias=True, **kwargs):
        super().__init__(units, **kwargs)
        self.unit_forget_bias = unit_forget_bias

    def build(self, input_shape):
        super().build(input_shape)
        if self.use_bias and self.unit_forget_bias:
            with torch.no_grad():
                self.bias[self.units:2 * self.units] = 1.0

    def _state_names(self):
        return ["h", "c"]

    def _run(self, x, states):
        weights = [self.kernel.t(), self.recurrent_kernel.t()]
        if self.use_bias:
            weights += [self.bias, torch.zeros_like(self.bias)]
        seq, h, c = _VF.lstm(x, tuple(states), weights, self.use_bias, 1, 0.0, False, False, True)
        return seq, [h[0], c[0]]

    def get_config(self):
        return {**super().get_config(), "unit_forget_bias": self.unit_forget_bias}


class GRU(_RNN):
    """Gated recurrent unit (Keras ``reset_after=True`` variant, bias shape (2, 3*units))."""

    gates = 3

    def __init__(self, units, reset_after=True, **kwargs):
        if not reset_after:
            raise ValueError("GRU(reset_after=False) is not supported by torch's fused kernel; use reset_after=True.")
        super().__init__(units, **kwargs)

    def _bias_shape(self):
        return (2, 3 * self.units)

    def _state_names(self):
        return ["h"]

    def _torch_order(self, w):
        u = self.units
        return torch.cat([w[..., u:2 * u], w[..., :u], w[..., 2 * u:]], dim=-1)   # (z, r, h) -> (r, z, n)

    def _run(self, x, states):
        weights = [self._torch_order(self.kernel).t(), self._torch_order(self.recurrent_kernel).t()]
        if self.use_bias:
            b = self._torch_order(self.bias)
            weights += [b[0], b[1]]
        seq, h = _VF.gru(x, states[0], weights, self.use_bias, 1, 0.0, False, False, True)
        return seq, [h[0]]

    def get_config(self):
        return {**super().get_config(), "reset_after": True}


class Bidirectional(Layer):
    """Runs ``layer`` forwards and a copy backwards over time and merges the outputs.

    ``merge_mode`` is 'concat' (default), 'sum', 'mul', 'ave' or None (a list of both outputs).
    """

    _MODES = ("concat", "sum", "mul", "ave", None)

    def __init__(self, layer, merge_mode="concat", backward_layer=None, **kwargs):
        if merge_mode not in self._MODES:
            raise ValueError(f"Invalid merge mode. Received: {merge_mode!r}. Merge mode should be one of {list(self._MODES)}.")
        if isinstance(layer, dict):
            from multidev.keras.saving.serialization import deserialize_layer
            layer = deserialize_layer(layer)
        super().__init__(**kwargs)
        config = layer.get_config()
        config.pop("batch_input_shape", None)
        self.forward_layer = type(layer).from_config({**config, "name": f"forward_{layer.name}"})
        if backward_layer is None:
            backward_layer = type(layer).from_config({**config, "name": f"backward_{layer.name}",
                                                      "go_backwards": not config.get("go_backwards", False)})
        self.backward_layer = backward_layer
        for sub in (self.forward_layer, self.backward_layer):   # Keras 3: masked steps give zeros in sequences
            sub.zero_output_for_mask = bool(getattr(sub, "return_sequences", False))
        self.merge_mode = merge_mode
        self.return_sequences = config.get("return_sequences", False)
        self.return_state = config.get("return_state", False)

    def call(self, inputs, training=False):
        fwd = self.forward_layer(inputs, training=training)
        bwd = self.backward_layer(inputs, training=training)
        fwd_states = bwd_states = []
        if self.return_state:
            fwd, fwd_states, bwd, bwd_states = fwd[0], fwd[1:], bwd[0], bwd[1:]
        if self.return_sequences:
            bwd = bwd.flip(1)
        out = self._merge(fwd, bwd)
        if not self.return_state:
            return out
        return (out if isinstance(out, list) else [out]) + list(fwd_states) + list(bwd_states)

    def compute_mask(self, inputs, mask=None):
        return mask if self.return_sequences else None   # as Keras 3 (merged outputs)

    def _merge(self, a, b):
        if self.merge_mode == "concat":
            return torch.cat([a, b], dim=-1)
        if self.merge_mode == "sum":
            return a + b
        if self.merge_mode == "mul":
            return a * b
        if self.merge_mode == "ave":
            return (a + b) / 2
        return [a, b]

    def get_config(self):
        config = self.forward_layer.get_config()
        config["name"] = config["name"].replace("forward_", "", 1)
        layer_cfg = {"class_name": type(self.forward_layer).__name__, "config": config}
        return {**super().get_config(), "layer": layer_cfg, "merge_mode": self.merge_mode}
