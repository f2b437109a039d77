"""Tensors a module stores on itself inside ``strategy.run`` are kept per replica, as each DDP rank
keeps its own module object.

Programs write tensors to their modules in ``forward``: ``self.hidden = torch.tanh(h)`` read back by the
loss, attention maps kept for logging, a stateful RNN's ``self.state = (h.detach(), c.detach())``, and
torch's own ``torch.nn.utils.prune`` and legacy ``weight_norm``, whose forward pre-hooks recompute
``module.weight = weight_orig * weight_mask`` before every call. torch's ``Module.__setattr__`` puts
such a value in the instance ``__dict__``, and the replicas are threads sharing the module object: a
replica read another's tensor between that write and its own read. Its backward then reached the
other replica's copies (refused on CPU; on two logical GPUs of one card it trained silently wrong), or
both backwards ran through one graph ("Trying to backward through the graph a second time" from
prune, about one run in three).

The same holds for torch's mode flag: TRADES-style adversarial training calls ``model.eval()`` to
craft its examples inside the step and ``model.train()`` after, so one replica switched every
replica's dropout and BatchNorm mode in the middle of another's forward (trained silently wrong).

Now, in a replica of a run of several, a write of a value holding a tensor (a tensor, or a tuple,
list or dict of them), of ``training``, or any write to a name already kept per replica, goes into the module's
per-replica slots, and the name leaves ``__dict__``: reads then reach ``Module.__getattr__``, which
answers with the calling replica's value (one that has not written yet reads the value from before
the first write). Outside runs a read answers replica 0's value (what rank 0's script sees), and a
write or ``del`` replaces every replica's (every rank's script does it). Each replica's value
survives from one run to the next, as each rank's does. Numbers go per replica too (``self.calls +=
1`` counted every replica's call into one counter, with lost updates between threads), and so do flags
written by a module's ``train()`` / ``eval()`` (loralib's ``self.merged`` guarding the merge in
``train(False)``: one replica's write made the other skip its own merge), and so does an empty list or
dict (``self.features = []`` in ``forward``, appended to after: replicas appended to whichever list was
written last); other Python values (other flags, a string, a list made in ``__init__``) stay shared.

The slots live in the module's ``__dict__`` only while runs are going (``enter_run`` / ``leave_run``,
called by the replica runner): between runs each name holds replica 0's value in ``__dict__`` again
and the slots wait in a weak table, so ``copy.deepcopy(model)``, ``torch.save(model)`` and ``vars()``
see a plain module. A write between runs reaches every replica at the next run.

``Module.__setattr__`` and ``__delattr__`` are wrapped while a strategy lives (``live_hooks``);
``Module.__getattr__``, on every parameter read's path, only once a module keeps a value per
replica, so programs that never do pay nothing.
"""

from __future__ import annotations

import numbers
import sys
import threading
import weakref
from typing import Any, Callable

import torch
from torch.nn import Module

from multidev.values import context

_SLOTS = "_multidev_replica_attributes"   # in a module's __dict__ during runs: name -> values
_BEFORE = "before"   # values' key of the value the name had before a replica first wrote it
_SHOWN = "shown"     # values' key of the value put back in __dict__ between runs (replica 0's)
_ABSENT = object()   # no value: the name was not set, or a replica deleted it
_READER = "reader"   # optional values' key: reader(module, name, by replica) answers reads outside runs
_replica_env = context.replica_env
_lock = threading.RLock()   # first writes of a name, and runs entering and leaving
_getattr_original: list[Callable[[Module, str], Any]] = []   # set while __getattr__ is wrapped
# id(module) -> (weak module, its slots): by identity, as a WeakKeyDictionary would compare modules with
# ``==`` and hash them with their ``__hash__``, which torchmetrics' Metric overloads (its ``__eq__`` builds a
# metric: inside a replica that re-entered the held lock and hung; its hash follows its states)
_kept: dict[int, tuple["weakref.ref[Module]", dict]] = {}


def _keep_slots(module: Module, slots: dict) -> None:
    key = id(module)
    if key not in _kept:
        _kept[key] = (weakref.ref(module, lambda _, key=key: _kept.pop(key, None)), slots)


def _kept_items() -> list[tuple[Module, dict]]:
    return [(module, slots) for module, slots in ((ref(), slots) for ref, slots in list(_kept.values()))
            if module is not None]
_runs = [0]   # runs going on (of any strategy): the slots are in the modules' __dict__ while > 0


def _per_replica_value(value: Any) -> bool:
    """A tensor or something holding one, or a number (a counter ``self.calls += 1``, a temperature
    annealed in ``forward``: each replica advancing it once per run, as each rank does), or a flag written
    by a module's ``train()`` / ``eval()`` (loralib's ``self.merged``, see ``_in_mode_switch``)."""
    if isinstance(value, bool):
        return _in_mode_switch()
    if isinstance(value, numbers.Number):
        return True
    if type(value) in (list, dict) and not value:   # ``self.features = []`` in forward, appended to after
        return True
    return _holds_tensor(value)


_SWITCH_FRAMES = 12   # how far up the calling thread's stack a train() / eval() is looked for


def _in_mode_switch() -> bool:
    """Whether the flag is written inside a module's ``train()`` / ``eval()`` (an override's body). Such a
    flag goes with the mode, which each replica switches for itself: loralib's ``train(False)`` merges its
    update into the replica's weight copy under ``if not self.merged``. Other flags stay shared: one-time
    guards of work on the one module object (transformers' ``_output_capturing_hooks_installed``, set
    in the first forward after the first replica installed its hooks: per replica, every replica
    installed them again)."""
    frame = sys._getframe(1)
    for _ in range(_SWITCH_FRAMES):
        if frame is None:
            return False
        if frame.f_code.co_name in ("train", "eval") and isinstance(frame.f_locals.get("self"), Module):
            return True
        frame = frame.f_back
    return False


def _holds_tensor(value: Any, depth: int = 0) -> bool:
    if isinstance(value, torch.Tensor):
        return not isinstance(value, torch.nn.Parameter)
    if depth < 3 and isinstance(value, (tuple, list)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if depth < 3 and isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    return False


def _plain_attribute(module: Module, name: str) -> bool:
    """Not a parameter, buffer or submodule, nor found on the class (a property, or a class-level
    default that a read would find before ``__getattr__`` is asked)."""
    d = module.__dict__
    if any(name in d.get(kind, ()) for kind in ("_parameters", "_buffers", "_modules")):
        return False
    return not any(name in vars(klass) for klass in type(module).__mro__)


def _value_for(values: dict, replica_id: int) -> Any:
    value = values.get(replica_id, _ABSENT)
    return values.get(_BEFORE, _ABSENT) if value is _ABSENT else value


def _missing(module: Module, name: str) -> AttributeError:
    return AttributeError(f"'{type(module).__name__}' object has no attribute '{name}'")


def _getattr(module: Module, name: str) -> Any:
    slots = module.__dict__.get(_SLOTS)
    if slots is not None:
        values = slots.get(name)
        if values is not None:
            env = _replica_env()
            if env is None and _READER in values:
                return values[_READER](module, name, _by_replica(values))
            value = _value_for(values, 0 if env is None else env.replica_id)
            if value is _ABSENT:
                raise _missing(module, name)
            return value
    return _getattr_original[0](module, name)


def _wrap_getattr() -> None:
    """Route reads through the slots (with ``_lock`` held: before any name leaves a ``__dict__``)."""
    if not _getattr_original:
        _getattr_original.append(Module.__dict__["__getattr__"])
        Module.__getattr__ = _getattr


def _by_replica(values: dict) -> dict[int, Any]:
    """Replica 0's value (the one from before if it wrote none) and each other replica's own."""
    own = {k: v for k, v in values.items() if isinstance(k, int) and v is not _ABSENT}
    first = _value_for(values, 0)
    return own if first is _ABSENT else {**own, 0: first}


def _slots_of(module: Module) -> dict | None:
    """The module's slots: in its ``__dict__`` during runs, in ``_kept`` between them."""
    slots = module.__dict__.get(_SLOTS)
    if slots is None:
        kept = _kept.get(id(module))
        slots = None if kept is None or kept[0]() is not module else kept[1]
    return slots


def kept(module: Module, name: str) -> bool:
    """Whether ``module.<name>`` is kept per replica."""
    slots = _slots_of(module)
    return slots is not None and name in slots


def has_own(module: Module, name: str, replica_id: int) -> bool:
    """Whether replica ``replica_id`` wrote ``module.<name>`` since it was last written for every replica."""
    slots = module.__dict__.get(_SLOTS)
    values = None if slots is None else slots.get(name)
    return values is not None and replica_id in values


def shared_value(module: Module, name: str) -> Any:
    """In a run: the value every replica starts from (the one from before the first per-replica write)."""
    slots = module.__dict__.get(_SLOTS)
    values = None if slots is None else slots.get(name)
    value = module.__dict__.get(name, _ABSENT) if values is None else values[_BEFORE]
    if value is _ABSENT:
        raise _missing(module, name)
    return value


def keep(module: Module, name: str, value: Any, replica_id: int,
         reader: Callable[[Module, str, dict], Any]) -> None:
    """In a run: keep ``value`` as replica ``replica_id``'s ``module.<name>``; outside runs ``reader`` answers
    reads (``reader(module, name, values)``: replica id -> that replica's value, replica 0's always there)."""
    _store(module, name, value, replica_id)
    module.__dict__[_SLOTS][name][_READER] = reader


def unify(module: Module, name: str, value: Any) -> None:
    """Make ``value`` every replica's ``module.<name>`` (what a write outside runs does, which an in-place
    change of the value read outside runs is not)."""
    with _lock:
        slots = _slots_of(module)
        if slots is not None:
            slots.pop(name, None)
        module.__dict__[name] = value


def _store(module: Module, name: str, value: Any, replica_id: int) -> None:
    slots = module.__dict__.get(_SLOTS)
    values = None if slots is None else slots.get(name)
    if values is None:
        with _lock:
            _wrap_getattr()
            slots = module.__dict__.setdefault(_SLOTS, {})
            _keep_slots(module, slots)
            values = slots.get(name)
            if values is None:
                values = {_BEFORE: module.__dict__.get(name, _ABSENT)}
                slots[name] = values
                module.__dict__.pop(name, None)
    values[replica_id] = value


def _per_replica_write(module: Module, name: str, value: Any, env: Any) -> bool:
    """Whether ``module.<name> = value`` in replica ``env`` is kept per replica (and was)."""
    if env.strategy.extended.num_local_replicas < 2 or isinstance(value, (torch.nn.Parameter, Module)):
        return False
    slots = module.__dict__.get(_SLOTS)
    if slots is None or name not in slots:
        if not (name == "training" or _per_replica_value(value)) or not _plain_attribute(module, name):
            return False
    _store(module, name, value, env.replica_id)
    return True


def _own_copy_written_back(module: Module, name: str, value: Any) -> bool:
    """``module.weight += d`` under ``no_grad`` in a replica: the read gave the replica's own copy (a plain
    tensor, which torch's ``__setattr__`` refuses for a parameter) and the in-place op changed it already."""
    params = module.__dict__.get("_parameters")
    return isinstance(value, torch.Tensor) and params is not None and name in params and params[name] is value


def _slots_in(module: Module, slots: dict) -> None:
    """A run starts: the names leave ``__dict__`` again; one written there since the last run (a
    reset between epochs) is every replica's value now."""
    d = module.__dict__
    for name, values in list(slots.items()):
        current = d.pop(name, _ABSENT)
        if current is not values.get(_SHOWN, _ABSENT):
            slots[name] = {_BEFORE: current}
    d[_SLOTS] = slots


def _slots_out(module: Module, slots: dict) -> None:
    """The last run ended: replica 0's values back in ``__dict__``, as reads outside runs give them."""
    d = module.__dict__
    d.pop(_SLOTS, None)
    for name, values in slots.items():
        read = values.get(_READER)
        value = _value_for(values, 0) if read is None else read(module, name, _by_replica(values))
        values[_SHOWN] = value
        if value is _ABSENT:
            d.pop(name, None)
        else:
            d[name] = value


def enter_run() -> None:
    """Called by the replica runner as a run starts (paired with ``leave_run``)."""
    with _lock:
        _runs[0] += 1
        if _runs[0] == 1:
            for module, slots in _kept_items():
                _slots_in(module, slots)


def leave_run() -> None:
    with _lock:
        _runs[0] -= 1
        if _runs[0] == 0:
            for module, slots in _kept_items():
                _slots_out(module, slots)


def _wrap_setattr(original: Callable) -> Callable:
    def __setattr__(self: Module, name: str, value: Any) -> None:
        env = _replica_env()
        if env is not None:
            if _per_replica_write(self, name, value, env) or _own_copy_written_back(self, name, value):
                return
        else:
            slots = _slots_of(self)
            if slots is not None:   # in a merge_call during a run, or between runs: written for every replica
                slots.pop(name, None)   # (between runs ``_slots_in`` compared by identity: ``False``, ``0`` were lost)
        original(self, name, value)

    __setattr__._multidev_wrapped = True
    return __setattr__


def _wrap_delattr(original: Callable) -> Callable:
    def __delattr__(self: Module, name: str) -> None:
        slots = self.__dict__.get(_SLOTS)
        values = None if slots is None else slots.get(name)
        if values is None:
            return original(self, name)
        env = _replica_env()
        if env is None:   # in a merge_call during a run: every replica's
            del slots[name]
            if _value_for(values, 0) is _ABSENT:
                raise _missing(self, name)
            return None
        if _value_for(values, env.replica_id) is _ABSENT:
            raise _missing(self, name)
        values[env.replica_id] = _ABSENT
        return None

    __delattr__._multidev_wrapped = True
    return __delattr__


def install() -> Callable[[], None]:
    """Wrap ``Module.__setattr__``/``__delattr__`` (``__getattr__`` on first use); returns the undo."""
    set_original, del_original = Module.__dict__["__setattr__"], Module.__dict__["__delattr__"]
    Module.__setattr__ = _wrap_setattr(set_original)
    Module.__delattr__ = _wrap_delattr(del_original)

    def remove() -> None:
        Module.__setattr__, Module.__delattr__ = set_original, del_original
        with _lock:
            for module, slots in _kept_items():
                _slots_out(module, slots)
            _kept.clear()
            if _getattr_original:
                Module.__getattr__ = _getattr_original.pop()

    return remove
