"""Numbers a step function writes into ``optimizer.param_groups`` inside ``strategy.run`` are each
replica's own, as each DDP rank's optimizer is its own.

Programs change hyperparameters in the step: ``for g in optimizer.param_groups: g["lr"] *= 0.5``
(a decay written by hand), a warm-up ``g["lr"] = base * min(1, step / warmup)``, a momentum schedule,
a counter kept in the group. The replicas are threads sharing the user's optimizer, so ``*=`` ran once
per replica on one number: with 2 replicas the learning rate halved twice per step, silently (DDP's
ranks each halve their own once). Now, in a replica of a run of several local replicas, a number
written to a group of an optimizer over distributed variables goes into the group's per-replica
values: that replica's reads (``g["lr"]``, ``g.get``, ``in``) and its ``optimizer.step()`` (its twin's
hyperparameters, ``optimizer_hooks``) see it, the other replicas do not. When the run ends the
replicas' values must agree, and become the group's value (what every rank's optimizer holds); values
that differ raise ``ValueError`` after the run (the copies were updated with different hyperparameters).

Writes outside runs, and in cross-replica context during one (an LR scheduler's ``step()``, made once
per step by ``scheduler_hooks``), are every replica's. Other values (a tuple of betas, a flag) stay one
value shared by the replicas: assigning them is the same on every replica. A 0-d tensor (a rate computed
with torch ops) is a number here: a replica reading it gets a copy of its own (``*=`` changes the tensor
read in place, and ``fill_`` may not assign it back).

The user's groups become ``ReplicaGroup`` dicts when they are added (``optimizer_calls`` wraps
``add_param_group`` and ``load_state_dict``, which torch's constructor and a restore go through), so a
group is the same object before, during and after runs; ``state_dict()`` packs plain dicts.
"""

from __future__ import annotations

import numbers
import threading
from typing import Any

import torch

from multidev.values.context import replica_env as _replica_env
from multidev.values.variables import DistributedVariable

_ABSENT = object()
_lock = threading.Lock()
_written: list["ReplicaGroup"] = []   # groups with per-replica values in the runs going on
_disagreements: list[str] = []        # found when the last run ended, raised by ``raise_disagreements``
_runs = [0]


def _per_replica(value: Any) -> bool:
    """A number, or one held by a tensor (a rate computed with torch ops, ``0.5 * (1 + torch.cos(...))``)."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not value.dtype == torch.bool
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not _ABSENT and b is not _ABSENT and bool(a == b))


class ReplicaGroup(dict):
    """A param group whose number writes in a replica are that replica's (see the module)."""

    _own: dict | None = None   # during a run: replica id -> {key: value}, "before" -> {key: value}, "n"
    _lent: dict | None = None  # during a run: (replica id, key) -> (copy read, its version, shared, its version)
    _where = "optimizer.param_groups[?]"   # for messages

    def _own_values(self) -> dict | None:
        own = self._own
        if own is None:
            return None
        env = _replica_env()
        return None if env is None else own.get(env.replica_id)

    def __getitem__(self, key: Any) -> Any:
        mine = self._own_values()
        if mine is not None and key in mine:
            return mine[key]
        value = dict.__getitem__(self, key)
        return self._own_tensor(key, value) if isinstance(value, torch.Tensor) else value

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def _own_tensor(self, key: Any, value: torch.Tensor) -> torch.Tensor:
        """A tensor rate read in a replica is a copy lent to it: ``g["lr"] *= 0.5`` multiplies the tensor read
        in place before it assigns it back, which on the shared tensor halved it once per replica. A copy
        changed in place (``g["lr"].fill_(x)``) is the replica's value; one only read is dropped, and a new
        one is lent once the shared tensor changed (a scheduler stepped in the step, once: ``scheduler_hooks``)."""
        env = _replica_env()
        if env is None or key == "params" or not _per_replica(value) or env.strategy.extended.num_local_replicas < 2:
            return value
        lent = None if self._lent is None else self._lent.get((env.replica_id, key))
        if lent is not None and (lent[0]._version != lent[1] or (lent[2] is value and value._version == lent[3])):
            return lent[0]
        copy = value.clone()
        with _lock:
            self._start(env.strategy.extended.num_local_replicas)
            if self._lent is None:
                self._lent = {}
            self._lent[(env.replica_id, key)] = (copy, copy._version, value, value._version)
        return copy

    def _start(self, replicas: int) -> None:
        """This run's first per-replica value of the group (``_lock`` held): settled when the run ends."""
        if self._own is None:
            self._own = {"before": {}, "n": replicas}
            _written.append(self)

    def _changed_lent(self, replica_id: int) -> dict:
        """The copies replica ``replica_id`` changed in place (and did not assign back)."""
        return {key: lent[0] for (r, key), lent in (self._lent or {}).items()
                if r == replica_id and lent[0]._version != lent[1]}

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        mine = self._own_values()
        return mine is not None and key in mine

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __setitem__(self, key: Any, value: Any) -> None:
        env = _replica_env()
        if env is None:
            own = self._own
            if own is not None:   # in a merge_call during a run: every replica's value
                for values in own.values():
                    values.pop(key, None)
        elif key != "params" and env.strategy.extended.num_local_replicas > 1 and (
                _per_replica(value) or self._kept(key)):
            self._keep(key, value, env.replica_id, env.strategy.extended.num_local_replicas)
            return
        dict.__setitem__(self, key, value)

    def _kept(self, key: Any) -> bool:
        own = self._own
        return own is not None and key in own["before"]

    def _keep(self, key: Any, value: Any, replica_id: int, replicas: int) -> None:
        own = self._own
        if own is None or key not in own["before"] or replica_id not in own:
            with _lock:
                self._start(replicas)
                own = self._own
                own["before"].setdefault(key, dict.get(self, key, _ABSENT))
                own.setdefault(replica_id, {})
        own[replica_id][key] = value

    def _settle(self) -> None:
        """The run ended: the replicas' agreed values become the group's (replica 0's where they differ,
        noted for ``raise_disagreements``)."""
        own, self._own = self._own, None
        lent, self._lent = self._lent, None
        for (r, key), (copy, version, shared, _) in (lent or {}).items():
            if copy._version != version and key not in own.get(r, {}):
                own["before"].setdefault(key, shared)
                own.setdefault(r, {})[key] = copy
        for key, before in own["before"].items():
            values = [own.get(r, {}).get(key, before) for r in range(own["n"])]
            chosen = values[0]
            if not all(_same(v, chosen) for v in values[1:]):
                shown = ["(none)" if v is _ABSENT else float(v) if isinstance(v, torch.Tensor) else v for v in values]
                _disagreements.append(f"{self._where}[{key!r}]: {shown}")
            if chosen is not _ABSENT:
                dict.__setitem__(self, key, chosen)


def replica_values(group: dict, replica_id: int) -> dict | None:
    """The numbers replica ``replica_id`` wrote to ``group`` in this run (None: none)."""
    own = getattr(group, "_own", None)
    if own is None:
        return None
    written = own.get(replica_id)
    if group._lent:
        changed = group._changed_lent(replica_id)
        return {**changed, **(written or {})} if changed else written
    return written


def adopt(optimizer: torch.optim.Optimizer) -> None:
    """Make ``optimizer``'s groups over distributed variables ``ReplicaGroup`` dicts (in place in its list)."""
    groups = optimizer.__dict__.get("param_groups")
    for i, group in enumerate(groups or ()):
        if type(group) is dict and any(isinstance(p, DistributedVariable) for p in group.get("params", ())):
            groups[i] = ReplicaGroup(group)
            groups[i]._where = f"{type(optimizer).__name__}.param_groups[{i}]"


def enter_run() -> None:
    """Called by the replica runner as a run starts (paired with ``leave_run``)."""
    with _lock:
        _runs[0] += 1
        if _runs[0] == 1:
            _disagreements.clear()   # left by a run that raised its own error first


def leave_run() -> None:
    with _lock:
        _runs[0] -= 1
        if _runs[0] or not _written:
            return
        groups = list(_written)
        _written.clear()
    for group in groups:
        group._settle()


def raise_disagreements() -> None:
    """Raise ``ValueError`` if the replicas of the last run wrote different hyperparameters."""
    if not _disagreements:
        return
    found = "; ".join(_disagreements)
    _disagreements.clear()
    raise ValueError(
        f"The replicas of strategy.run wrote different values to the optimizer's param_groups ({found}, one "
        "value per replica): each replica's optimizer.step() uses its own, and the copies of the variables would "
        "no longer agree. "
        "Write a hyperparameter the same way on every replica (from the step count, not the replica id), or "
        "set it outside strategy.run, where it is every replica's.")
