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
the arguments that are not per replica, through dicts, lists and plain objects; the parameters and
buffers of a module built outside the scope; not the modules of the scope, optimizers or distributed
values, whose state other checks keep per replica) with their version counters. A run
is watched (a ``TorchFunctionMode`` in each replica noting which replicas write which of those tensors
in place, by region and op) in the step function's first 4 runs, and in the runs after an unwatched one
moved such a tensor's version (a write every k steps): a tensor two replicas wrote with one op raises
``ValueError`` after the run, naming it and the per-replica fixes. Disjoint regions
(``out[replica_id].copy_(v)``; ``t[i] = v`` is not counted), one replica's writes (``if replica_id ==
0:``) and a ``merge_call``'s (cross-replica, once) pass, and the tensor is trusted from then on.
Unwatched runs cost the walk (about 8 us for a step that reaches a model, an optimizer and a few dicts)
and a version read per tensor; writes through ``.data`` (a new version counter) are seen in watched runs
only, so a run that reaches a trainable parameter of a module built outside the scope is always watched.

CentralStorageStrategy's variables are one storage for every replica: in the watched runs their copies
are watched too, and a second replica's write with the same op that changes the copy again (a manual
``p.data.add_(p.grad, alpha=-lr)``, made once per replica) raises the variable's own error; a repeated
clamp or mask, which changes nothing, passes (``_Run.write``).
"""

from __future__ import annotations

import functools
import itertools
import threading
import types
import weakref
from typing import Any, Callable

import torch
from torch.nn.parameter import is_lazy
from torch.overrides import TorchFunctionMode

from multidev.values import context
from multidev.values.distributed import DistributedValues
from multidev.values.variables import DistributedVariable

_MAX_NODES = 500   # objects visited per walk: the closure of a step function is small
_MAX_DEPTH = 5
_WATCH_RUNS = 64   # runs a suspect stays watched without being written again
_FIRST_RUNS = 4    # a step function's first runs are watched (writes every step, or through .data)
_FIRST_RUNS_PER_CODE = 16   # ... and at most this many runs of one code object's functions
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
            if not isinstance(obj, DistributedVariable) and _has_storage(obj):
                found.setdefault(id(obj), (obj, path))
            continue
        if isinstance(obj, torch.nn.Module):
            for t, p in _plain_module_tensors(obj, path):
                found.setdefault(id(t), (t, p))
        elif depth < _MAX_DEPTH and not isinstance(obj, _OPAQUE):
            stack.extend((child, p, depth + 1) for child, p in reversed(_children(obj, path)))
    return found


def _plain_module_tensors(module: torch.nn.Module, path: str) -> list[tuple[torch.Tensor, str]]:
    """The parameters and buffers of a module built outside the scope (plain tensors, one set for every
    replica): cleanrl's target networks, ``target_param.data.copy_(tau * param.data + (1 - tau) *
    target_param.data)`` in the step, moved once per replica (a polyak step applied twice, silently).
    A module built in the scope (its first tensor distributed) is left to the variables' checks."""
    named = itertools.chain(module.named_parameters(), module.named_buffers())
    first = next(named, None)
    if first is None or isinstance(first[1], DistributedVariable):
        return []
    return [(t, f"{path}.{name}") for name, t in itertools.chain([first], itertools.islice(named, _MAX_NODES))
            if not is_lazy(t) and _has_storage(t)]


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _has_storage(t: torch.Tensor) -> bool:
    """A dense tensor with memory (not sparse, not on the meta device)."""
    return t.layout is torch.strided and t.device.type != "meta"


#: In-place methods that change a tensor's metadata or autograd flags, not its values.
_NOT_WRITES = frozenset(["requires_grad_", "detach_", "share_memory_", "squeeze_", "unsqueeze_", "t_", "transpose_",
                         "swapdims_", "swapaxes_", "as_strided_", "rename_", "resize_as_", "retain_grad_"])


_IN_PLACE: dict = {}   # torch function -> whether it writes its first argument in place (by its name)
_IN_PLACE_OPERATORS = frozenset(f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                       "lshift", "rshift", "and", "xor", "or", "matmul"))


def _targets(func: Any, args: tuple, kwargs: dict) -> list:
    """The tensors ``func`` writes in place: ``out=``, or the first argument of ``name_`` / ``__iadd__``...
    (a list of them for ``torch._foreach_*_``); ``t[i] = v`` is not counted (disjoint slots are its use)."""
    if "out" in kwargs:
        target = kwargs["out"]
    else:
        in_place = _IN_PLACE.get(func)
        if in_place is None:
            name = getattr(func, "__name__", "")
            in_place = _IN_PLACE[func] = name in _IN_PLACE_OPERATORS or (
                name.endswith("_") and not name.endswith("__") and name not in _NOT_WRITES)
        if not in_place or not args:
            return []
        target = args[0]
    if isinstance(target, torch.Tensor):
        return [target]
    if isinstance(target, (list, tuple)):
        return [t for t in target if isinstance(t, torch.Tensor)]
    return []


class _WriteMode(TorchFunctionMode):
    """In a replica of a watched run: in-place writes of watched tensors go through ``_Run.write``."""

    def __init__(self, run: "_Run") -> None:
        super().__init__()
        self._run = run

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():
            # dynamo traces this mode into a compiled model's graph, and cannot trace the op-name checks
            # (a fullgraph model called on a tensor from outside the step raised); compiled code's writes
            # are not watched
            return func(*args, **kwargs)
        targets = _targets(func, args, kwargs)
        if targets:
            return self._run.write(func, args, kwargs, targets)
        return func(*args, **kwargs)


class _Run:
    """One run's tensors, their versions before it, and (watched) the replicas that wrote each region."""

    def __init__(self, tensors: dict, watched: dict) -> None:
        self.versions = [(t, path, t._version) for t, path in tensors.values()]
        self.watched = watched                # storage -> its name (a path, or the distributed variable)
        self.writers: dict[tuple, set] = {}   # (storage, offset, shape, stride, op) -> replica ids
        self.changed: list[tuple] = []        # regions a later replica's write changed again
        self._lock = threading.Lock()

    def write(self, func: Any, args: tuple, kwargs: dict, targets: list) -> Any:
        """``func`` in a replica, its watched targets' writers noted by region and op. On a variable's
        one copy (CentralStorageStrategy) a region another replica already wrote with the same op is
        compared before and after (serialised: a write racing the other replica's would compare
        half-written values): a second write that changes it applied the update once more, one that
        leaves it (WGAN's clamp, a pruning mask, which work there) changed nothing; another op on the
        region (replica 0's optimizer update before every replica clamps) is no repetition. A plain
        tensor two replicas write with one op is refused whatever the values (Lookahead's slow weights
        on one copy of the weights come out right or not depending on the threads' order)."""
        replica_id = context.current_replica_id()
        keys = [(t, (s, t.storage_offset(), tuple(t.shape), t.stride(), func)) for t in targets
                if _has_storage(t) and (s := _storage(t)) in self.watched]
        if not keys or replica_id is None:   # (a merge_call's write is cross-replica: once)
            return func(*args, **kwargs)
        with self._lock:
            again = []
            for t, key in keys:
                writers = self.writers.setdefault(key, set())
                if writers - {replica_id} and not isinstance(self.watched[key[0]], str):
                    again.append((t, key))   # (one copy of a variable: see write's docstring)
                writers.add(replica_id)
            if not again:
                return func(*args, **kwargs)
            with torch.no_grad():
                before = [t.detach().clone() for t, _ in again]
                result = func(*args, **kwargs)
                self.changed.extend(key for (t, key), b in zip(again, before) if not torch.equal(b, t.detach()))
            return result

    def mode(self) -> Any:
        return _WriteMode(self) if self.watched else None


def _held(table: dict, storage: int) -> bool:
    """Whether ``table`` holds ``storage`` for a tensor still alive on it (a freed tensor's address, or a
    live tensor's old storage after ``.data = t``, may come back as another tensor's)."""
    entry = table.get(storage)
    if entry is None:
        return False
    tensor = (entry[0] if isinstance(entry, list) else entry)()
    if tensor is None or _storage(tensor) != storage:
        del table[storage]
        return False
    return True


def _unversioned(t: torch.Tensor) -> bool:
    """A trainable plain parameter (a target network built outside the scope): its updates by hand go
    through ``.data`` (``target_param.data.copy_(...)``, cleanrl's, often first after ``learning_starts``
    steps), which moves no version the unwatched runs read, so every run that reaches it is watched."""
    return type(t) is torch.nn.Parameter and t.requires_grad


class SharedTensors:
    """One runner's record: tensors trusted (written once or alike by the replicas of a watched run) and
    suspects (moved in an unwatched run, to be watched)."""

    def __init__(self, strategy_name: str) -> None:
        self._strategy_name = strategy_name
        self._trusted: dict[int, weakref.ref] = {}   # storage -> the tensor
        self._suspects: dict[int, list] = {}         # storage -> [the tensor (weakly), runs left to watch]
        self._first: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # fn (or its object) -> runs
        self._code_runs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # code -> watched runs

    def start(self, fn: Callable, args: tuple, kwargs: dict, shared_variables: Callable[[], list]) -> _Run:
        """Caller thread, before the replicas start: the run's record, watched in ``fn``'s first runs
        (then also the variables that every replica's copy is one storage of: ``shared_variables()``)."""
        tensors = captured(fn, args, kwargs)
        first = self._count_first(fn)
        if first:
            watched = {_storage(t): path for t, path in tensors.values() if not self._is_trusted(t)}
            copies = [(v._components[0], v) for v in shared_variables()]
            watched.update((_storage(c), v) for c, v in copies if _has_storage(c))
        else:   # suspects; and trainable plain parameters, whose writes go through ``.data`` (no version moves)
            watched = {s: path for t, path in tensors.values()
                       if _held(self._suspects, s := _storage(t)) or _unversioned(t) and not self._is_trusted(t)}
        return _Run(tensors, watched)

    def _count_first(self, fn: Callable) -> bool:
        """Whether this is one of ``fn``'s first runs (counted: a closure made again for another model is
        another function; a bound method counts per object and function)."""
        holder, func = getattr(fn, "__self__", fn), getattr(fn, "__func__", None)
        code = getattr(func or fn, "__code__", None)
        if code is not None:   # a closure made anew for every step (a lambda in the loop) is watched 16 times
            if self._code_runs.get(code, 0) >= _FIRST_RUNS_PER_CODE:
                return False
            self._code_runs[code] = self._code_runs.get(code, 0) + 1
        try:
            counts = self._first.setdefault(holder, {})
        except TypeError:   # not weakly referenceable: as its code allows
            return True
        counts[func] = counts.get(func, 0) + 1
        return counts[func] <= _FIRST_RUNS

    def finish(self, run: _Run, replicas: int) -> None:
        """Caller thread, after a successful run: ``ValueError`` for a plain tensor two replicas wrote, or a
        variable's one copy a second replica's write changed again; tensors that moved otherwise become
        suspects (watched in the next runs) or, once watched, trusted."""
        shared = sorted(name for (storage, *_), writers in run.writers.items()
                        if isinstance(name := run.watched[storage], str) and len(writers) > 1)
        if shared:
            raise self._refusal(shared[0], replicas)
        for storage, *_ in run.changed:
            raise run.watched[storage]._written_by_every_replica()
        written = {storage for storage, *_ in run.writers}
        for storage in run.watched:
            if storage not in written and storage in self._suspects:
                self._suspects[storage][1] -= 1
                if self._suspects[storage][1] <= 0:
                    del self._suspects[storage]
        for tensor, _, version in run.versions:
            storage = _storage(tensor)
            if storage in written:
                self._suspects.pop(storage, None)
                self._trusted[storage] = weakref.ref(tensor)
            elif tensor._version != version and storage not in run.watched and not self._is_trusted(tensor):
                if not _held(self._suspects, storage):
                    self._suspects[storage] = [weakref.ref(tensor), _WATCH_RUNS]

    def _is_trusted(self, tensor: torch.Tensor) -> bool:
        return _held(self._trusted, _storage(tensor))

    def _refusal(self, path: str, replicas: int) -> ValueError:
        name = self._strategy_name
        return ValueError(
            f"{name}.run wrote the tensor {path} in place in several replicas: the step function reaches it from "
            f"outside (a closure, a global or an argument), so it is one tensor for all {replicas} replicas of this "
            "process, and each replica applied its write to it (each DDP rank writes its own; a hand-written "
            "Lookahead's slow weights or Polyak average would move once per replica). Keep such state per replica: "
            f"in a module built in `with strategy.scope():` (a second model for the average, a target network, or a "
            "buffer: `self.register_buffer(...)`; each replica updates its own copy, as each rank), or in a dict "
            "keyed by md.distribute.get_replica_context().replica_id_in_sync_group; or update it once, outside "
            "strategy.run (between steps) or in md.distribute.get_replica_context().merge_call(fn). (Refused after "
            "this run, which already made the writes.)")
