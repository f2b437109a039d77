"""``nn.RNN`` / ``nn.LSTM`` / ``nn.GRU`` built in a strategy's scope keep their distributed variables in
``_flat_weights`` inside ``strategy.run``, so every replica's call reads its own copies.

torch's recurrent modules cache their weights in a list attribute, ``self._flat_weights``, and every
``forward`` first calls ``_update_flat_weights``: when ``getattr(self, name)`` is no longer the cached
tensor, it rebuilds the list from the attributes. Inside ``strategy.run`` the module's attributes are
the calling replica's copies (``module_hooks``' replica-aware ``_parameters``), so each replica rebuilt
the one list of the module all replicas share with its own copies, and read it back a moment later:
when another replica's rebuild landed in between, replica 0 ran its GRU on replica 1's weights
(seen as "Replica 0's loss.backward() reached replica 1's copy of 'GRU.bias_hh_l0:0'" in about 1 run
in 30 of the seq2seq tutorial under load). Now, in replica context, a module whose weights are
distributed variables keeps the variables themselves in the list (every replica writes the same
list, so the write is harmless), and the recurrent op picks the calling replica's copies through the
variable's ``__torch_function__``, as any op on a variable does. Elsewhere torch's method runs as is.
A weight computed at each call (``parametrizations.weight_norm``, AWD-LSTM's ``WeightDrop``) is not in
``_parameters``: the list holds the replica's computed tensor, and is written per replica.

A state made for the global batch (a DDP program's ``model.init_hidden(batch_size)`` with its loader's
batch size, the global batch once ported) got only torch's "Expected hidden[0] size (1, 4, 6), got
[1, 8, 6]" in every replica; ``check_hidden_size`` now says, in a replica of several, that the state has
more rows than the replica's batch and how to make it per replica.

Installed while a strategy lives (``live_hooks``).
"""

from __future__ import annotations

import weakref
from typing import Callable

import torch

from multidev.values import context
from multidev.values.variables import DistributedVariable


def _keep_variables(original: Callable[[torch.nn.RNNBase], None]) -> Callable[[torch.nn.RNNBase], None]:
    def _update_flat_weights(self: torch.nn.RNNBase) -> None:
        if context.replica_env() is None:
            return original(self)
        stored = [dict.get(self._parameters, name) for name in self._flat_weights_names]
        if not any(isinstance(v, DistributedVariable) for v in stored):
            return original(self)   # a module built inside the step: the replica's own
        if any(v is None for v in stored):   # weights computed per call: each replica's own list
            return _per_replica_weights(self, stored)
        if any(w is not v for w, v in zip(self._flat_weights, stored)):
            self._flat_weights = stored
            self._flat_weight_refs = [None if v is None else weakref.ref(v) for v in stored]
        return None

    _update_flat_weights._multidev_wrapped = True
    return _update_flat_weights


def _per_replica_weights(self: torch.nn.RNNBase, stored: list) -> None:
    """A weight missing from ``_parameters`` is computed at each call (a parametrization, the legacy
    ``weight_norm``'s pre-hook, AWD-LSTM's ``WeightDrop`` setting it in ``forward``) from the calling replica's
    copies: torch's ``getattr`` of each name, as its own rebuild does, in a list written per replica
    (``replica_attributes`` keeps a module's tensor lists per replica), so no replica runs on another's."""
    names = self._flat_weights_names
    weights = [v if v is not None else getattr(self, name, None) for name, v in zip(names, stored)]
    self._flat_weights = weights
    self._flat_weight_refs = [None if w is None else weakref.ref(w) for w in weights]


def _refuse_global_state(original: Callable[..., None]) -> Callable[..., None]:
    def check_hidden_size(self: torch.nn.RNNBase, hx: torch.Tensor, expected_hidden_size, *args, **kwargs) -> None:
        try:   # (torch's check first: a state of the right size costs nothing more)
            return original(self, hx, expected_hidden_size, *args, **kwargs)
        except RuntimeError as error:
            env = context.replica_env()
            if env is None or env.num_replicas_in_sync < 2 or len(expected_hidden_size) != 3 or hx.dim() != 3 \
                    or hx.size(1) <= expected_hidden_size[1] or (hx.size(0), hx.size(2)) != (
                        expected_hidden_size[0], expected_hidden_size[2]):
                raise
            raise ValueError(
                f"the {type(self).__name__}'s hidden state holds {hx.size(1)} rows for a replica's batch of "
                f"{expected_hidden_size[1]} ({env.num_replicas_in_sync} replicas in sync): it was made for the "
                f"global batch (hidden size {list(hx.size())!r}, expected {list(expected_hidden_size)!r}). Each "
                "replica runs on its slice of the batch, as each DDP rank does: make the state in the step from "
                "the replica's batch (model.init_hidden(x.size(0))), or from the global batch size // "
                "strategy.num_replicas_in_sync, or pass None on the first step and carry strategy.run's output "
                "(each replica's own state) to the next.") from error

    check_hidden_size._multidev_wrapped = True
    return check_hidden_size


def install() -> Callable[[], None]:
    """Wrap ``torch.nn.RNNBase._update_flat_weights`` and ``check_hidden_size``; returns the function that
    unwraps them."""
    original = torch.nn.RNNBase.__dict__["_update_flat_weights"]
    check = torch.nn.RNNBase.__dict__["check_hidden_size"]
    torch.nn.RNNBase._update_flat_weights = _keep_variables(original)
    torch.nn.RNNBase.check_hidden_size = _refuse_global_state(check)

    def remove() -> None:
        torch.nn.RNNBase._update_flat_weights = original
        torch.nn.RNNBase.check_hidden_size = check

    return remove
