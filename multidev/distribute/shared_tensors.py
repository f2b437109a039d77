"""A plain tensor that the step function reaches from outside, written in place by several replicas of
one ``strategy.run``: refused.

A DDP program keeps state beside its model in plain tensors and updates it in the loop body: Lookahead
by hand (``slow[n].add_(p.data - slow[n], alpha=0.5)`` every k steps, then ``p.data.copy_(slow[n])``),
Polyak averaging (``avg[n].mul_(0.99).add_(p.detach(), alpha=0.01)`` after each ``optimizer.step()``).
Each rank holds its own dict. Replicas are threads sharing the one dict: each replica applied its write
to the one tensor (the average decayed twice a step, 6e-3 off DDP's after 4 steps; Lookahead's slow
weights moved twice and the replicas copied different values into their weights), silently and in
the threads' order.

Before each run of several local replicas (caller thread) ``SharedTensors.start`` collects the plain
tensors the replicas all reach (``captured``: the step function's closure, the globals its code names,
the arguments that are not per replica, through dicts, lists and plain objects; not modules, optimizers
or distributed values, whose state other checks keep per replica) with their version counters. A run
is watched (a ``TorchFunctionMode`` in each replica noting which replicas write which of those tensors
in place) when it is the step function's first, or when an earlier run moved such a tensor's version:
a tensor two replicas wrote (the same region: ``out[replica_id].copy_(v)`` writes disjoint ones, and
``t[i] = v`` is not counted) raises ``ValueError`` after the run, naming it and the per-replica fixes.
A tensor one replica wrote (``if replica_id == 0:``) or a ``merge_call`` wrote (cross-replica, once) is
trusted from then on. Unwatched runs only read the version counters (about 0.2 us a tensor, and the
walk: a few us for a step that reaches a model, an optimizer and a few dicts); writes through ``.data``
(a new version counter) are not seen.
"""

from __future__ import annotations

import functools
import types
import weakref
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from multidev.values import context
from multidev.values.distributed import DistributedValues
from multidev.values.variables import DistributedVariable

_MAX_NODES = 500   # objects visited per walk: the closure of a step function is small
_MAX_DEPTH = 5
_WATCH_RUNS = 64   # runs a suspect stays watched without being written again
_OPAQUE = (types.ModuleType, type, torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler,
           DistributedValues, str, bytes, int, float, complex, bool, type(None))


def _code_globals(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_code_globals(const))
    return names


def _children(obj: Any, path: str) -> list[tuple[Any, str]]:
    """What ``obj`` holds that a replica may reach, each with its path for the error."""
    if isinstance(obj, dict):
        return [(v, f"{path}[{k!r}]") for k, v in list(obj.items())[:_MAX_NODES]]
    if isinstance(obj, (list, tuple)):
        return [(v, f"{path}[{i}]") for i, v in enumerate(obj[:_MAX_NODES])]
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        out = []
        for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
            try:
                out.append((cell.cell_contents, name))
            except ValueError:   # an empty cell
                pass
        glob = obj.__globals__
        out.extend((glob[name], name) for name in dict.fromkeys(_code_globals(code)) if name in glob)
        return out
    if isinstance(obj, types.MethodType):
        return [(obj.__func__, path), (obj.__self__, "self")]
    if isinstance(obj, functools.partial):
        return [(obj.func, path), (obj.args, f"{path}.args"), (obj.keywords, f"{path}.keywords")]
    module = getattr(type(obj), "__module__", "") or ""
    if module.split(".")[0] in ("torch", "multidev", "numpy", "builtins") or not hasattr(obj, "__dict__"):
        return []
    return [(v, f"{path}.{k}") for k, v in list(vars(obj).items())[:_MAX_NODES]]


def captured(fn: Callable, args: tuple, kwargs: dict) -> dict[int, tuple[torch.Tensor, str]]:
    """id -> (tensor, path) of the plain tensors every replica of ``strategy.run(fn, args, kwargs)`` reaches."""
    found: dict[int, tuple[torch.Tensor, str]] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, str, int]] = [(kwargs, "kwargs", 0), (args, "args", 0),
                                         (fn, getattr(fn, "__qualname__", "fn"), 0)]
    while stack and len(seen) < _MAX_NODES:
        obj, path, depth = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if not isinstance(obj, DistributedVariable) and not obj.is_meta:
                found.setdefault(id(obj), (obj, path))
            continue
        if depth < _MAX_DEPTH and not isinstance(obj, _OPAQUE):
            stack.extend((child, p, depth + 1) for child, p in reversed(_children(obj, path)))
    return found


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _in_place_target(func: Any, args: tuple, kwargs: dict) -> Any:
    if "out" in kwargs:
        return kwargs["out"]
    name = getattr(func, "__name__", "")
    if args and ((name.endswith("_") and not name.endswith("__")) or (name.startswith("__i") and name.endswith("__"))):
        return args[0]
    return None


class _WriteMode(TorchFunctionMode):
    """In a replica of a watched run: notes the replica writing a watched tensor in place."""

    def __init__(self, run: "_Run") -> None:
        super().__init__()
        self._run = run

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = _in_place_target(func, args, kwargs)
        if isinstance(target, torch.Tensor) and target.device.type != "meta":
            self._run.note(target)
        return func(*args, **kwargs)


class _Run:
    """One run's tensors, their versions before it, and (watched) the replicas that wrote each region."""

    def __init__(self, tensors: dict, watched: dict) -> None:
        self.versions = [(t, path, t._version) for t, path in tensors.values()]
        self.watched = {_storage(t): path for t, path in watched.values()}   # storage -> path
        self.writers: dict[tuple, set] = {}   # (storage, offset, shape, stride) -> replica ids

    def note(self, target: torch.Tensor) -> None:
        storage = _storage(target)
        if storage not in self.watched:
            return
        replica_id = context.current_replica_id()
        if replica_id is not None:   # (a merge_call's write is cross-replica: once)
            key = (storage, target.storage_offset(), tuple(target.shape), target.stride())
            self.writers.setdefault(key, set()).add(replica_id)

    def mode(self) -> Any:
        return _WriteMode(self) if self.watched else None


class SharedTensors:
    """One runner's record: tensors trusted (one writer seen) and suspects (moved, to be watched)."""

    def __init__(self, strategy_name: str) -> None:
        self._strategy_name = strategy_name
        self._trusted: dict[int, weakref.ref] = {}   # storage -> the tensor one replica (or merge_call) wrote
        self._suspects: dict[int, int] = {}    # storage -> runs left to watch

    def start(self, fn: Callable, args: tuple, kwargs: dict, first: bool) -> _Run:
        """Caller thread, before the replicas start: the run's record (watched on ``fn``'s first run)."""
        tensors = captured(fn, args, kwargs)
        if first:
            watched = {k: v for k, v in tensors.items() if not self._is_trusted(v[0])}
        else:
            watched = {k: v for k, v in tensors.items() if _storage(v[0]) in self._suspects}
        return _Run(tensors, watched)

    def finish(self, run: _Run, replicas: int) -> None:
        """Caller thread, after a successful run: ``ValueError`` for a tensor two replicas wrote; tensors
        that moved otherwise become suspects (watched in the next runs) or, once watched, trusted."""
        for (storage, *_), writers in run.writers.items():
            if len(writers) > 1:
                raise self._refusal(run.watched[storage], replicas)
        written = {storage for storage, *_ in run.writers}
        for storage in run.watched:
            if storage in written or storage not in self._suspects:
                continue
            self._suspects[storage] -= 1
            if self._suspects[storage] <= 0:
                del self._suspects[storage]
        for tensor, _, version in run.versions:
            storage = _storage(tensor)
            if storage in written:
                self._suspects.pop(storage, None)
                self._trusted[storage] = weakref.ref(tensor)
            elif tensor._version != version and storage not in run.watched and not self._is_trusted(tensor):
                self._suspects.setdefault(storage, _WATCH_RUNS)

    def _is_trusted(self, tensor: torch.Tensor) -> bool:
        ref = self._trusted.get(_storage(tensor))
        return ref is not None and ref() is not None

    def _refusal(self, path: str, replicas: int) -> ValueError:
        name = self._strategy_name
        return ValueError(
            f"{name}.run wrote the tensor {path} in place in several replicas: the step function reaches it from "
            f"outside (a closure, a global or an argument), so it is one tensor for all {replicas} replicas of this "
            "process, and each replica applied its write to it (each DDP rank writes its own; a hand-written "
            "Lookahead's slow weights or Polyak average would move once per replica). Keep such state per replica: "
            f"in a module built in `with strategy.scope():` (a second model for the average, or a buffer: "
            "`self.register_buffer(...)`; each replica updates its own copy, as each rank), or in a dict keyed by "
            "md.distribute.get_replica_context().replica_id_in_sync_group; or update it once, outside "
            "strategy.run (between steps) or in md.distribute.get_replica_context().merge_call(fn). (Refused after "
            "this run, which already made the writes.)")
