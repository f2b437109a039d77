"""``optimizer.state`` read or written inside ``strategy.run`` is the calling replica's, as each DDP rank's
optimizer state is its own.

A step function may write optimizer state: a momentum reset at a restart (``opt.state[p]["momentum_buffer"]
.zero_()``), moments scaled in place, an entry dropped (``opt.state[p] = {}``). The replicas are threads sharing
the user's optimizer, whose ``state`` holds the canonical entries, so every replica wrote those: a scaling ran
once per replica on one tensor, and where the replicas keep their own copies (``optimizer_hooks``: GPUs, an
optimizer updated on every replica) only replica 0's state was written; either way training went on silently
off DDP's. Now, in a replica of a run of several local replicas, ``optimizer.state`` (a ``ReplicaState``, a
``defaultdict``) reads and writes that replica's entries:

* where the replicas keep copies, replica r > 0 sees its twin's state (replica 0's is the user's);
* where each variable's state exists once (a split update: on its owner replica; shared storage: replica 0),
  a replica sees the entries it owns, and its own copy of each other entry as the last optimizer step left
  it: the write every replica makes lands once, on the owner's entry, and a replica's write to another's
  copy is dropped at its next step (the owner made the same write). Reading needs no copy where no replica
  writes, but nothing tells a read from a write: each entry the step touches is copied once a step.

Outside runs (and with one local replica) it is the user's dict. An optimizer over distributed variables gets
a ``ReplicaState`` where torch makes its ``defaultdict`` (its constructor's ``add_param_group``,
``load_state_dict``: ``optimizer_calls``), one the user assigns before the next run; it pickles as torch's
``defaultdict``. multidev's own code reads the canonical entries with ``dict``'s methods.
"""

from __future__ import annotations

import threading
import weakref
from collections import abc, defaultdict
from typing import Any, Iterator

import torch

from multidev.distribute.optimizer_twins import copy_state_entry
from multidev.values.context import replica_env
from multidev.values.variables import DistributedVariable


class ReplicaState(defaultdict):
    """The user's ``optimizer.state``: in a replica (several local), that replica's entries (see the module)."""

    _plan: Any = None   # weakref to the optimizer's plan (optimizer_hooks._Plan)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args or (dict,))

    def _view(self) -> "abc.MutableMapping | None":
        env = replica_env()
        plan = None if env is None or self._plan is None else self._plan()
        if plan is None or len(plan.devices) < 2:
            return None
        return view_for(plan, self, env.replica_id)

    def __getitem__(self, key: Any) -> Any:
        view = self._view()
        return defaultdict.__getitem__(self, key) if view is None else view[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        view = self._view()
        if view is None:
            defaultdict.__setitem__(self, key, value)
        else:
            view[key] = value

    def __delitem__(self, key: Any) -> None:
        view = self._view()
        if view is None:
            defaultdict.__delitem__(self, key)
        else:
            del view[key]

    def __contains__(self, key: object) -> bool:
        view = self._view()
        return defaultdict.__contains__(self, key) if view is None else key in view

    def __iter__(self) -> Iterator:
        view = self._view()
        return defaultdict.__iter__(self) if view is None else iter(view)

    def __len__(self) -> int:
        view = self._view()
        return defaultdict.__len__(self) if view is None else len(view)

    def get(self, key: Any, default: Any = None) -> Any:
        view = self._view()
        return defaultdict.get(self, key, default) if view is None else view.get(key, default)

    def keys(self) -> Any:
        view = self._view()
        return defaultdict.keys(self) if view is None else view.keys()

    def values(self) -> Any:
        view = self._view()
        return defaultdict.values(self) if view is None else view.values()

    def items(self) -> Any:
        view = self._view()
        return defaultdict.items(self) if view is None else view.items()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        view = self._view()
        return defaultdict.setdefault(self, key, default) if view is None else view.setdefault(key, default)

    def clear(self) -> None:
        view = self._view()
        if view is None:
            defaultdict.clear(self)
        else:
            view.clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        view = self._view()
        if view is None:
            defaultdict.update(self, *args, **kwargs)
        else:
            view.update(*args, **kwargs)

    def pop(self, key: Any, *default: Any) -> Any:
        view = self._view()
        return defaultdict.pop(self, key, *default) if view is None else view.pop(key, *default)

    def __reduce__(self) -> tuple:   # torch.save / deepcopy: torch's own defaultdict of the canonical entries
        return defaultdict, (self.default_factory,), None, None, iter(dict.items(self))


def convert(optimizer: torch.optim.Optimizer) -> ReplicaState | None:
    """``optimizer.state`` as a ``ReplicaState`` (torch's constructor and ``load_state_dict`` made a
    ``defaultdict``: ``optimizer_calls`` converts it there, so the object stays the same across runs); None for
    an optimizer's own mapping, left as it is."""
    state = optimizer.__dict__.get("state")
    if type(state) is ReplicaState:
        return state
    if type(state) not in (defaultdict, dict):
        return None
    state = ReplicaState(dict, dict.items(state))
    optimizer.state = state
    return state


def attach(optimizer: torch.optim.Optimizer, plan: Any, *, between_runs: bool = True) -> None:
    """See ``optimizer.state`` through ``plan``, with fresh views (a replica's copies of entries others own
    are dropped). Between runs (caller thread) a state the user assigned is converted; a plan made in a
    replica's first step only attaches to a ``ReplicaState`` already there (the others may be reading it)."""
    plan.state_views = [None] * len(plan.devices)
    plan.generations, plan.snapshots = [0] * len(plan.devices), {}
    if plan.variable_of is None:   # a replica's tensor (``model.fc.weight`` in the step) -> its variable
        plan.variable_of = {id(c): p for p in plan.params if isinstance(p, DistributedVariable) for c in p._components}
    state = convert(optimizer) if between_runs else optimizer.__dict__.get("state")
    if type(state) is ReplicaState:
        state._plan = weakref.ref(plan)


def view_for(plan: Any, state: ReplicaState, replica_id: int) -> "abc.MutableMapping | None":
    """Replica ``replica_id``'s view of the user's ``state`` under ``plan`` (None: the user's entries)."""
    views = plan.state_views
    if views is None or not plan.twins:
        return None
    view = views[replica_id]
    if view is None:
        if plan.one_state:
            view = _OwnedOrCopied(plan, state, replica_id)
        elif replica_id > 0:
            view = _TwinState(plan, replica_id)
        else:
            view = _Canonical(plan, state)
        views[replica_id] = view
    return view


def _variable(plan: Any, key: Any) -> Any:
    """The optimizer's variable of ``key``, a replica's tensor of it (``model.fc.weight`` read in the step)."""
    return plan.variable_of.get(id(key), key)


def _local(plan: Any, key: Any, replica_id: int) -> Any:
    key = _variable(plan, key)
    return key._components[replica_id] if isinstance(key, DistributedVariable) and id(key) in plan.index else key


class _Canonical(abc.MutableMapping):
    """The user's entries (replica 0's where the replicas keep copies), keyed by variable or replica tensor."""

    def __init__(self, plan: Any, state: ReplicaState):
        self._plan, self._state = plan, state

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self._state, _variable(self._plan, key))

    def __setitem__(self, key: Any, entry: Any) -> None:
        dict.__setitem__(self._state, _variable(self._plan, key), entry)

    def __delitem__(self, key: Any) -> None:
        dict.__delitem__(self._state, _variable(self._plan, key))

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self._state, _variable(self._plan, key))

    def __iter__(self) -> Iterator:
        return iter(list(dict.keys(self._state)))

    def __len__(self) -> int:
        return dict.__len__(self._state)


class _TwinState(abc.MutableMapping):
    """Replica r's twin's own state (keyed by its tensors), keyed by the user's variables."""

    def __init__(self, plan: Any, replica_id: int):
        self._plan, self._r = plan, replica_id
        self._variable_of = {id(p._components[replica_id]): p for p in plan.params
                             if isinstance(p, DistributedVariable)}

    def _store(self) -> dict:
        return self._plan.twins[self._r].state

    def __getitem__(self, key: Any) -> Any:
        return self._store()[_local(self._plan, key, self._r)]   # (the twin's defaultdict makes a missing entry)

    def __setitem__(self, key: Any, entry: Any) -> None:
        self._store()[_local(self._plan, key, self._r)] = entry

    def __delitem__(self, key: Any) -> None:
        del self._store()[_local(self._plan, key, self._r)]

    def __contains__(self, key: object) -> bool:
        return _local(self._plan, key, self._r) in self._store()

    def __iter__(self) -> Iterator:
        return (self._variable_of.get(id(t), t) for t in list(self._store()))

    def __len__(self) -> int:
        return len(self._store())


_ABSENT = object()


class _OwnedOrCopied(abc.MutableMapping):
    """The entries replica r owns (the user's), and its own copy of every other it reads in this step.

    A copy is of the entry as the optimizer's last step left it (``snapshot``: taken at the first touch of
    any replica since that step, the owner's included, so an owner's write in the step never shows in another
    replica's copy); a replica's next ``optimizer.step()`` makes its copies stale (``plan.generations``)."""

    def __init__(self, plan: Any, state: ReplicaState, replica_id: int):
        self._plan, self._state, self._r = plan, state, replica_id
        self._copies: dict[int, tuple[Any, Any, int]] = {}   # id(key) -> (key, this replica's entry, generation)

    def _owner(self, key: Any) -> int | None:
        i = self._plan.index.get(id(key))   # (key: a variable, _variable's)
        owners = self._plan.engine.owners
        return None if i is None else owners[i] if owners is not None else 0

    def _snapshot(self, key: Any, owner: int) -> Any:
        plan, at = self._plan, (id(key), self._plan.generations[self._r])
        with plan.snapshot_lock:
            snap = plan.snapshots.get(at, _ABSENT)
            if snap is _ABSENT:
                entry = dict.get(self._state, key)
                snap = plan.snapshots[at] = (copy_state_entry(entry, plan.devices[owner]) if isinstance(entry, dict)
                                             else None)
        return snap

    def _held(self, key: Any, owner: int) -> tuple:
        generation = self._plan.generations[self._r]
        held = self._copies.get(id(key))
        if held is None or held[2] != generation:
            snap = self._snapshot(key, owner)
            entry = _ABSENT if snap is None else copy_state_entry(snap, self._plan.devices[self._r])
            held = self._copies[id(key)] = (key, entry, generation)
        return held

    def __getitem__(self, key: Any) -> Any:
        key = _variable(self._plan, key)
        owner = self._owner(key)
        if owner is None or owner == self._r:
            if owner is not None:
                self._snapshot(key, owner)   # (before the owner may write it)
            return dict.__getitem__(self._state, key)
        held = self._held(key, owner)
        if held[1] is _ABSENT:   # defaultdict's: a missing entry is made
            held = self._copies[id(key)] = (key, {}, held[2])
        return held[1]

    def __setitem__(self, key: Any, entry: Any) -> None:
        key = _variable(self._plan, key)
        owner = self._owner(key)
        if owner is None or owner == self._r:
            if owner is not None:
                self._snapshot(key, owner)
            dict.__setitem__(self._state, key, entry)
        else:
            self._copies[id(key)] = (key, entry, self._held(key, owner)[2])

    def __delitem__(self, key: Any) -> None:
        key = _variable(self._plan, key)
        if key not in self:
            raise KeyError(key)
        owner = self._owner(key)
        if owner is None or owner == self._r:
            if owner is not None:
                self._snapshot(key, owner)
            dict.__delitem__(self._state, key)
        else:
            self._copies[id(key)] = (key, _ABSENT, self._held(key, owner)[2])

    def __contains__(self, key: object) -> bool:
        key = _variable(self._plan, key)
        owner = self._owner(key)
        if owner is None or owner == self._r:
            return dict.__contains__(self._state, key)
        return self._held(key, owner)[1] is not _ABSENT

    def __iter__(self) -> Iterator:
        keys = [k for k in dict.keys(self._state) if k in self]
        seen = {id(k) for k in keys}
        return iter(keys + [k for k, entry, _ in list(self._copies.values())
                            if id(k) not in seen and entry is not _ABSENT])

    def __len__(self) -> int:
        return sum(1 for _ in self)
