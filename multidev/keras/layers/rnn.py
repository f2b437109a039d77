"""``layers.RNN``: runs any cell over time (Keras 3's RNN API), and ``SimpleRNN`` built on it.

A cell is a layer with ``state_size`` (an int or a list of ints) and ``call(inputs, states) ->
(output, new_states)``; the layer loops over the timesteps in Python (torch's fused kernels serve
``LSTM``/``GRU``). Masks, ``return_sequences``, ``return_state``, ``go_backwards`` and
``initial_state`` behave as Keras's.

Example:
    layer = md.keras.layers.RNN(MinimalRNNCell(32), return_sequences=True)
"""

from __future__ import annotations

import inspect

import torch

from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.rnn_cells import SimpleRNNCell
from multidev.keras.layers.rnn_state import StatefulLayerMixin, StatefulStates
from multidev.keras.layers.arg_checks import positive_int


def _sizes(state_size) -> list:
    return list(state_size) if isinstance(state_size, (list, tuple)) else [state_size]


class RNN(StatefulLayerMixin, Layer):
    """Loop ``cell`` over axis 1 of (batch, timesteps, features) inputs."""

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(cell, (list, tuple)):
            raise ValueError("md.keras's RNN takes one cell; stacked cells (a list, StackedRNNCells) are not "
                             f"supported. Received: {cell!r}. Stack RNN layers instead.")
        if not hasattr(cell, "state_size") or not callable(getattr(cell, "call", None)):
            raise ValueError(f"Argument `cell` should have a `call` method and a `state_size` attribute. "
                             f"Received: cell={cell!r}")
        self.cell = cell
        self.return_sequences, self.return_state, self.go_backwards = return_sequences, return_state, go_backwards
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.stateful = bool(stateful)
        self._carried = StatefulStates(self.name) if stateful else None
        self.input_spec = InputSpec(ndim=3)
        self.supports_masking = True
        self._cell_takes_training = "training" in inspect.signature(type(cell).call).parameters

    def build(self, input_shape):
        step_shape = (input_shape[0],) + tuple(input_shape[2:])
        self.cell._build_once(step_shape)

    def _initial_states(self, x, initial_state):
        sizes = _sizes(self.cell.state_size)
        if initial_state is None:
            return [x.new_zeros(x.shape[0], s) for s in sizes]
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        if len(states) != len(sizes):
            raise ValueError(f'Layer "{self.name}" expects {len(sizes)} initial state(s) of sizes {sizes}, '
                             f"received {len(states)}.")
        return states

    def call(self, inputs, initial_state=None, mask=None, training=False):
        x = inputs.flip(1) if self.go_backwards else inputs
        if mask is not None and self.go_backwards:
            mask = mask.flip(1)
        if self._carried is not None and initial_state is None:
            states = list(self._carried.initial(x.shape[0], lambda: self._initial_states(x, None)))
        else:
            states = self._initial_states(x, initial_state)
        extra = {"training": training} if self._cell_takes_training else {}
        outputs, prev = [], None
        for t in range(x.shape[1]):
            out, new = self.cell.call(x[:, t], states, **extra)
            new = list(new) if isinstance(new, (list, tuple)) else [new]
            if mask is not None:
                keep = mask[:, t].unsqueeze(-1)
                prev = out if prev is None else prev
                out = torch.where(keep, out, prev)
                new = [torch.where(keep, n, s) for n, s in zip(new, states)]
                prev = out
                if self.zero_output_for_mask:
                    out = torch.where(keep, out, torch.zeros_like(out))
            outputs.append(out)
            states = new
        if self._carried is not None:
            self._carried.remember(states)
        last = prev if mask is not None else outputs[-1]
        result = torch.stack(outputs, dim=1) if self.return_sequences else last
        return [result, *states] if self.return_state else result


    def get_config(self):
        from multidev.keras.saving.serialization import serialize_layer
        return {**super().get_config(), "cell": serialize_layer(self.cell), "return_sequences": self.return_sequences,
                "return_state": self.return_state, "go_backwards": self.go_backwards, "stateful": self.stateful,
                "zero_output_for_mask": self.zero_output_for_mask}

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        if isinstance(config.get("cell"), dict):
            from multidev.keras.saving.serialization import deserialize_layer
            config["cell"] = deserialize_layer(config["cell"])
        return cls(**config)


class SimpleRNN(RNN):
    """Fully-connected RNN: ``h = activation(x @ kernel + bias + h_prev @ recurrent_kernel)``."""

    def __init__(self, units, activation="tanh", use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", dropout=0.0, recurrent_dropout=0.0,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False, unroll=False,
                 zero_output_for_mask=False, **kwargs):
        cell = SimpleRNNCell(units, activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
                             recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
                             dropout=dropout, recurrent_dropout=recurrent_dropout)
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                         zero_output_for_mask=zero_output_for_mask, **kwargs)
        self.units = positive_int("units", units)

    def get_config(self):
        config = {k: v for k, v in super().get_config().items() if k != "cell"}
        return {**config, **{k: v for k, v in self.cell.get_config().items() if k not in ("name", "trainable", "dtype")}}
