"""The twin a local replica's ``optimizer.step()`` runs on (``optimizer_hooks``): an object of the user's
optimizer class over that replica's own leaf tensors, with a state seen through them."""

from __future__ import annotations

import numbers
from collections import OrderedDict, abc
from typing import Any, Iterator

import torch


class _StateByVariable(abc.MutableMapping):
    """A twin's ``state``: the user's ``optimizer.state``, keyed through the replica's tensors.

    torch's ``step`` looks up ``self.state[p]`` with the replica's tensor ``p``; the entry lives in
    the user's dict under ``p``'s variable, so ``state_dict()`` and checkpoints see it unchanged.
    """

    __slots__ = ("_store", "_variable_of", "_tensor_of")

    def __init__(self, store: dict, pairs: list[tuple[torch.Tensor, Any]]):
        self._store = store
        self._variable_of = {id(t): v for t, v in pairs}
        self._tensor_of = {id(v): t for t, v in pairs}

    def _key(self, tensor: Any) -> Any:
        return self._variable_of.get(id(tensor), tensor)

    # dict's own methods: the canonical entries, never a replica's view of them (replica_state.ReplicaState)
    def __getitem__(self, tensor: Any) -> Any:
        return dict.__getitem__(self._store, self._key(tensor))  # the user's defaultdict makes a missing entry

    def __setitem__(self, tensor: Any, entry: Any) -> None:
        dict.__setitem__(self._store, self._key(tensor), entry)

    def __delitem__(self, tensor: Any) -> None:
        dict.__delitem__(self._store, self._key(tensor))

    def get(self, tensor: Any, default: Any = None) -> Any:
        return dict.get(self._store, self._key(tensor), default)

    def __contains__(self, tensor: object) -> bool:
        return dict.__contains__(self._store, self._key(tensor))

    def __iter__(self) -> Iterator:
        return (self._tensor_of.get(id(v), v) for v in list(dict.keys(self._store)))

    def __len__(self) -> int:
        return dict.__len__(self._store)


def copy_state_entry(entry: dict, device: torch.device) -> dict:
    """A replica's own copy of an optimizer state entry on ``device`` (a scalar counter kept on the
    host, such as torch's ``step``, stays there)."""
    return {k: (v.detach().to("cpu" if v.dim() == 0 and v.device.type == "cpu" else device, copy=True)
                if isinstance(v, torch.Tensor) else v) for k, v in entry.items()}


def entry_signature(entry: Any) -> tuple:
    """What an optimizer state entry holds, to tell a write into it (``s["momentum_buffer"].zero_()``,
    ``s["exp_avg"] = ...``, ``s["step"] = 0``) from none: each tensor by identity and version counter (an
    in-place write bumps it), each number by value, anything else by identity. None for a missing entry."""
    if not isinstance(entry, dict):
        return (id(entry),)
    return tuple((k, id(v), v._version) if isinstance(v, torch.Tensor)
                 else (k, v) if isinstance(v, (numbers.Number, str)) else (k, id(v)) for k, v in entry.items())


def _replica_value(value: Any, leaf_of: dict, device: torch.device | None) -> Any:
    """An optimizer attribute as a replica's twin holds it: the optimizer's variables as the replica's tensors
    (a hand-written optimizer's ``self.params``); with ``device`` (a replica keeping its own state) other tensors
    copied (its buffers kept in ``self.buffers`` rather than ``self.state``: shared, every replica's step would
    update them). A list, tuple or dict is looked into once; unchanged, it stays the same object."""
    if isinstance(value, torch.Tensor):
        leaf = leaf_of.get(id(value))
        if leaf is not None or device is None or isinstance(value, torch.nn.Parameter):
            return value if leaf is None else leaf
        return value.detach().to(device, copy=True)
    if type(value) in (list, tuple, dict):
        items = value.items() if type(value) is dict else enumerate(value)
        new = {k: _replica_value(v, leaf_of, device) if isinstance(v, torch.Tensor) else v for k, v in items}
        if all(new[k] is v for k, v in (value.items() if type(value) is dict else enumerate(value))):
            return value
        return new if type(value) is dict else type(value)(new.values())
    return value


_SET_BY_TWIN = ("step", "state", "param_groups", "_multidev_twin")   # attributes a twin has of its own


def _synced_attribute(name: str) -> bool:
    return name not in _SET_BY_TWIN and not name.endswith("_hooks")


class TwinAttributes:
    """The user's optimizer's own attributes (a hand-written optimizer's step counter ``self.t``) kept in step
    with its twins': a value replica 0's ``step`` rebinds becomes the user's (what a DDP rank reads after its
    step), and one the user rebinds between runs (``opt.t = 0`` at a restart) reaches every replica's twin.
    A list, tuple or dict the step rebinds stays the twin's (it may hold the replica's tensors)."""

    def __init__(self, optimizer: torch.optim.Optimizer, twins: list, leaf_of: list[dict], own: list):
        self._leaf_of, self._own = leaf_of, own
        # The user's values and what replica 0's twin holds; after replica 0's step ``optimizer_hooks``'
        # ``after_step`` makes a value the step rebound (not a container) the user's, in all three (it is on
        # the update path: written there, not called here).
        self.users = {k: v for k, v in optimizer.__dict__.items() if _synced_attribute(k)}
        self.given = {k: twins[0].__dict__.get(k) for k in self.users}
        self._copies = _OwnCopies(optimizer, twins)

    def before_run(self, optimizer: torch.optim.Optimizer, twins: list) -> None:
        """Between runs: what the user rebound or added reaches every twin, as each replica's value, and what the
        user wrote in place into a tensor the twins hold copies of (``for v in opt.velocities: v.zero_()``)."""
        rebound = False
        for k, v in list(optimizer.__dict__.items()):
            if _synced_attribute(k) and v is not self.users.get(k, _MISSING):
                for r, twin in enumerate(twins):
                    twin.__dict__[k] = _replica_value(v, self._leaf_of[r], self._own[r])
                self.users[k], self.given[k] = v, twins[0].__dict__[k]
                rebound = True
        self._copies = _OwnCopies(optimizer, twins) if rebound else self._copies.sync()


class _OwnCopies:
    """The user's tensors in the optimizer's attributes that replicas keeping their own state hold copies of (a
    hand-written optimizer's ``self.velocities``), with version counters: replica 0's step writes the user's
    tensor and replica r's the same ops into its copy, so both counters move alike; a user's in-place write between
    runs moves the user's alone, and ``sync`` then copies the user's value into every replica's copy."""

    def __init__(self, optimizer: torch.optim.Optimizer, twins: list):
        self._pairs = []   # (user's tensor, [replica r's copy for r >= 1])
        for k, v in optimizer.__dict__.items():
            if _synced_attribute(k):
                held = [twin.__dict__.get(k) for twin in twins[1:]]
                self._pairs += [(t, copies) for t, copies in _paired(v, held)
                                if copies and all(c is not t for c in copies)]
        self._versions = self._now()

    def _now(self) -> list:
        return [(t._version, copies[0]._version) for t, copies in self._pairs]

    def sync(self) -> "_OwnCopies":
        for (t, copies), (user, replica) in zip(self._pairs, self._versions):
            if t._version - user != copies[0]._version - replica:
                with torch.no_grad():
                    for c in copies:
                        c.copy_(t)
        self._versions = self._now()
        return self


def _paired(value: Any, held: list) -> Iterator[tuple]:
    """(tensor, the twins' values at its place) in an attribute and the twins' (one level into a list, tuple or dict)."""
    if isinstance(value, torch.Tensor):
        if all(isinstance(h, torch.Tensor) for h in held):
            yield value, held
    elif type(value) in (list, tuple, dict) and all(type(h) is type(value) and len(h) == len(value) for h in held):
        keys = list(value) if type(value) is dict else range(len(value))
        for k in keys:
            if isinstance(value[k], torch.Tensor) and all(isinstance(h[k], torch.Tensor) for h in held):
                yield value[k], [h[k] for h in held]


_MISSING = object()


def _make_twin(optimizer: torch.optim.Optimizer, groups: list[dict], state: Any, leaf_of: dict | None = None,
               device: torch.device | None = None) -> torch.optim.Optimizer:
    """An object of ``optimizer``'s class with its settings (``defaults``, attributes), ``groups``
    and ``state``: what one replica's ``step`` runs on. It has no hooks of its own (torch runs the
    user's on the user's object), so nothing of the twin refers back to the user's optimizer. Its other
    attributes are ``_replica_value``'s (``leaf_of``: id(variable) -> the replica's tensor)."""
    twin = object.__new__(type(optimizer))
    twin.__dict__.update((k, OrderedDict() if k.endswith("_hooks") else _replica_value(v, leaf_of or {}, device))
                         for k, v in optimizer.__dict__.items()
                         if k not in _SET_BY_TWIN)   # "step": a scheduler's wrapper
    # An attribute that is a group's parameter list (LBFGS's ``_params``) is the twin group's.
    lists = {id(g["params"]): twin_group["params"] for g, twin_group in zip(optimizer.param_groups, groups)}
    for k, v in optimizer.__dict__.items():
        if id(v) in lists:
            setattr(twin, k, lists[id(v)])
    twin.param_groups = groups
    twin.state = state
    twin._multidev_twin = True   # a subclass's ``super().step()`` reaches the hooks again with the twin
    return twin
