"""``stateful=True`` for md.keras's RNNs: the final states of one call start the next (Keras's rule).

The states are kept per layer, detached (no gradient flows from one batch into the previous),
with the batch size of the first call; a call with another batch size raises TF's ValueError;
``reset_states()`` zeroes them. Inside a step of a strategy with several replicas they are refused:
one set of states cannot follow every replica's slice (TF's MirroredStrategy fails there too, as the
per-replica batch is not the states' batch).
"""

from __future__ import annotations

import torch

from multidev.keras.layers import keras_tensor
from multidev.values.context import current_replica_context


class StatefulStates:
    """The carried states of one stateful RNN layer (``None`` before its first call)."""

    def __init__(self, layer_name: str):
        self.layer_name = layer_name
        self.states: list | None = None

    def initial(self, batch: int, zeros) -> list:
        """The states to start from: the carried ones, or ``zeros()`` on the first call."""
        ctx = current_replica_context()
        if ctx is not None and ctx.num_replicas_in_sync > 1:
            raise ValueError(
                f'Layer "{self.layer_name}" is stateful, which md.keras cannot run on {ctx.num_replicas_in_sync} '
                "replicas: one set of states cannot follow every replica's slice of the batch (TF's MirroredStrategy "
                "fails it too: 'the batch size of the input sequences must be the same as the batch size of the "
                "initial state'). Train it on one device, or make it stateless and pass initial_state=.")
        if keras_tensor.inferring():   # a functional model's shape inference on zeros: nothing carried
            return zeros()
        if self.states is None:
            self.states = [s.detach() for s in zeros()]
        expected = int(self.states[0].shape[-2])
        if expected != batch:
            raise ValueError(f"If an RNN is stateful, the batch size of the input sequences must be the same as the "
                             f"batch size of the initial state. \n- Expected batch size: {expected}\n- Received batch "
                             f"size: {batch}")
        return self.states

    def remember(self, final: list) -> None:
        if keras_tensor.inferring():
            return
        self.states = [s.detach() for s in final]

    def reset(self) -> None:
        if self.states is not None:
            self.states = [torch.zeros_like(s) for s in self.states]


class StatefulLayerMixin:
    """What md.keras's RNN layers share: the output mask, ``states`` and ``reset_states`` (needs ``_carried``:
    a ``StatefulStates`` or None, and ``return_sequences``)."""

    def compute_mask(self, inputs, mask=None):
        return mask if self.return_sequences else None   # as Keras (also with go_backwards)

    @property
    def states(self) -> list | None:
        """A stateful layer's carried states (None before its first call or when not stateful)."""
        return None if self._carried is None else self._carried.states

    def reset_states(self):
        """Zero a stateful layer's carried states (Keras's ``reset_states``/``reset_state``)."""
        if self._carried is not None:
            self._carried.reset()

    reset_state = reset_states
