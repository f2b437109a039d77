"""torchmetrics' ``Metric`` objects updated inside ``strategy.run``: each replica accumulates its own states,
as each DDP rank's metric object does, and a read outside runs (``compute()``) reduces them as
torchmetrics' own sync reduces the ranks' states, so ``compute()`` gives DDP's global value.

A metric is one Python object for all replicas (each DDP rank has its own). Before, a state written out of
place (``self.tp = self.tp + tp``: ``Accuracy``, ``F1Score``) was kept per replica by ``replica_attributes``
and ``compute()`` outside read replica 0's half only; one written in place (``self.total += n``:
``MeanSquaredError``) raced on one tensor; list states (``AUROC``'s ``self.preds.append``) took every
replica's rows in the threads' order; and ``metric(preds, target)`` let one replica's ``forward`` flip the
flags (``_to_sync``, ``_enable_grad``) another replica's ``forward`` was using.

Now, while a strategy of several local replicas lives (``live_hooks``), ``Metric.__setattr__`` and
``Metric.forward`` give the calling replica its own copy of every state before it writes one (replica 0
continues the shared value, the others start from the states' defaults, as ranks after ``reset()``);
``forward`` runs one replica at a time per metric (its flags are the object's), and so do
``MetricCollection.update`` / ``forward`` (the first merges compute groups in the collection's dicts). Outside runs a state reads
as torchmetrics' ``_sync_dist`` leaves it after gathering the replicas' states in replica order: stacked
and reduced with the state's ``dist_reduce_fx`` (``sum``, ``mean``, ``max``, ``min``, ``cat``, a callable
or ``None``); a list state reads as the replicas' lists joined, which then become replica 0's (the others
empty) so an ``append`` outside runs lands. A write outside runs (``reset()``) gives every replica the value.
Inside a run, ``compute()`` of a metric that would sync (``sync_on_compute=True``, or ``dist_sync_on_step``
in ``forward``) raises ``ValueError``: under DDP it all-gathers across ranks there, and replicas are no
ranks; each replica's own value needs ``sync_on_compute=False``.

With several workers and no process group of the program's, ``compute()`` runs torchmetrics' own sync
over the job's workers (the worker collective as its ``dist_sync_fn``): DDP's value on every worker.

torchmetrics is patched when a strategy is created or a scope entered after ``import torchmetrics``.
"""

from __future__ import annotations

import sys
import threading
import weakref
from functools import partial
from typing import Any, Callable

import torch

from multidev.distribute import replica_attributes
from multidev.values import context

_replica_env = context.replica_env
_locks_lock = threading.Lock()
_originals: dict[str, Callable] = {}   # torchmetrics' own methods while patched


class _ByIdentity:
    """A weak table keyed by object identity (a metric's ``__eq__`` builds a metric, its hash follows
    its states); nothing is stored on the metric, so ``deepcopy`` / ``torch.save`` see a plain one."""

    def __init__(self) -> None:
        self._table: dict[int, tuple[weakref.ref, Any]] = {}

    def get(self, obj: Any) -> Any:
        entry = self._table.get(id(obj))
        return None if entry is None or entry[0]() is not obj else entry[1]

    def __setitem__(self, obj: Any, value: Any) -> None:
        key = id(obj)
        self._table[key] = (weakref.ref(obj, lambda _, key=key: self._table.pop(key, None)), value)

    def setdefault(self, obj: Any, value: Any) -> Any:
        found = self.get(obj)
        if found is None:
            self[obj] = found = value
        return found


_locks = _ByIdentity()        # metric or collection -> the lock its forward / update holds on replicas
_strategies = _ByIdentity()   # metric -> weak reference to the strategy whose replicas updated it


def _several(env: Any) -> bool:
    return env is not None and env.strategy.extended.num_local_replicas > 1


def _fresh(default: Any, like: Any) -> Any:
    """A state at its default, as ``Metric.reset`` makes it (on the device of the value it replaces)."""
    if isinstance(default, list):
        return []
    device = like.device if isinstance(like, torch.Tensor) else default.device
    return default.detach().clone().to(device)


def _reduced(metric: Any, name: str, values: dict[int, Any]) -> Any:
    """Every replica's ``name`` as torchmetrics' ``_sync_dist`` leaves it after gathering the ranks'."""
    ordered = [values[r] for r in sorted(values)]
    if isinstance(ordered[0], list):
        return [row for value in ordered for row in value]
    first = ordered[0]
    stacked = torch.stack([v.to(first.device) for v in ordered])
    reduction = metric._reductions[name]
    return stacked if reduction is None else reduction(stacked)


def _split(metric: Any, replica_id: int) -> None:
    """Give replica ``replica_id`` its own copy of every state it has none of."""
    for name, default in metric._defaults.items():
        if replica_attributes.has_own(metric, name, replica_id):
            continue
        shared = replica_attributes.shared_value(metric, name)
        own = shared if replica_id == 0 else _fresh(default, shared)
        replica_attributes.keep(metric, name, own, replica_id, _reduced)


def _unify_states(metric: Any) -> None:
    """Before an update outside runs: every state kept per replica becomes one value again (what a read
    outside runs gives: the reduced tensor, the replicas' rows joined), which the update then changes in
    place (``self.total += n``, ``self.preds.append(x)``) for every replica."""
    for name in metric._defaults:
        if replica_attributes.kept(metric, name):
            replica_attributes.unify(metric, name, getattr(metric, name))


def _remember(metric: Any, strategy: Any) -> None:
    """Note the strategy whose replicas update ``metric``: ``compute()`` outside runs syncs its workers."""
    ref = _strategies.get(metric)
    if ref is None or ref() is not strategy:
        _strategies[metric] = weakref.ref(strategy)


def _workers_of(metric: Any) -> Any:
    """The worker collective to sync ``metric`` over, if its strategy has several workers and the program
    started no process group of its own (torchmetrics then syncs over that one, as under DDP)."""
    ref = _strategies.get(metric)
    strategy = None if ref is None else ref()
    if strategy is None or strategy.extended.num_workers < 2:
        return None
    dist = torch.distributed
    return None if dist.is_available() and dist.is_initialized() else strategy.extended.worker_collective


def _worker_gather(collective: Any, tensor: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """torchmetrics' ``gather_all_tensors`` over the job's workers: every worker's ``tensor``, in worker
    order (shapes may differ along any dimension: padded to the largest, then cut back)."""
    shape = torch.tensor(tensor.shape, dtype=torch.int64).reshape(1, -1)
    shapes = collective.gather(shape, axis=0)
    largest = shapes.max(dim=0).values.tolist()
    padded = tensor.new_zeros(largest)
    padded[tuple(slice(0, n) for n in tensor.shape)] = tensor
    parts = collective.gather(padded.unsqueeze(0), axis=0)
    return [part[tuple(slice(0, n) for n in size)] for part, size in zip(parts, shapes.tolist())]


def _lock_of(metric: Any) -> threading.Lock:
    lock = _locks.get(metric)
    if lock is None:
        with _locks_lock:
            lock = _locks.setdefault(metric, threading.Lock())
    return lock


def _setattr(self: Any, name: str, value: Any) -> None:
    env = _replica_env()
    if "_defaults" in self.__dict__:
        if env is not None:
            _remember(self, env.strategy)
            if _several(env):
                _split(self, env.replica_id)
        elif name == "_update_count":   # update() or forward() outside runs (compute() writes it not)
            _unify_states(self)
    _originals["__setattr__"](self, name, value)


def _forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    env = _replica_env()
    if not _several(env):
        return _originals["forward"](self, *args, **kwargs)
    with _lock_of(self):
        _split(self, env.replica_id)
        return _originals["forward"](self, *args, **kwargs)


def _sync(self: Any, dist_sync_fn: Any = None, process_group: Any = None, should_sync: bool = True,
          distributed_available: Any = None) -> None:
    if should_sync and _several(_replica_env()):
        name = type(self).__name__
        raise ValueError(
            f"{name}.compute() inside strategy.run would sync the metric across replicas: under DDP "
            f"torchmetrics all-gathers every rank's state there, and replicas are threads, not ranks. Call "
            f"compute() outside strategy.run (it reduces every replica's state: the global value), or build "
            f"the metric with sync_on_compute=False (and dist_sync_on_step=False) for each replica's own value.")
    collective = _workers_of(self) if should_sync else None
    if collective is not None:   # several workers and no process group: sync over the job's workers
        dist_sync_fn, distributed_available = partial(_worker_gather, collective), _true
    return _originals["sync"](self, dist_sync_fn, process_group, should_sync, distributed_available)


def _true() -> bool:
    return True


def _serialized(method: str) -> Callable:
    """``MetricCollection.<method>`` one replica at a time: its first update merges compute groups in the
    collection's own dicts (two replicas raised ``KeyError`` there)."""
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        original = _originals[f"collection.{method}"]
        if not _several(_replica_env()):
            return original(self, *args, **kwargs)
        with _lock_of(self):
            return original(self, *args, **kwargs)

    return call


_PATCHES = {("torchmetrics.metric", "Metric"): {"__setattr__": _setattr, "forward": _forward, "sync": _sync},
            ("torchmetrics.collections", "MetricCollection"): {"collection.update": _serialized("update"),
                                                               "collection.forward": _serialized("forward")}}


def _classes() -> list[tuple[Any, dict[str, Callable]]]:
    found = []
    for (module_name, class_name), patches in _PATCHES.items():
        module = sys.modules.get(module_name)
        if module is None:
            return []   # torchmetrics not (fully) imported yet
        found.append((getattr(module, class_name), patches))
    return found


def _attribute(key: str) -> str:
    return key.rpartition(".")[2]


def _patch() -> bool:
    """Patch torchmetrics' ``Metric`` and ``MetricCollection`` if imported; whether they are (now) patched."""
    classes = _classes()
    if not classes:
        return False
    if not _originals:
        for cls, patches in classes:
            for key, patch in patches.items():
                _originals[key] = cls.__dict__[_attribute(key)]
                setattr(cls, _attribute(key), patch)
    return True


def _unpatch() -> None:
    if _originals:
        for cls, patches in _classes():
            for key in patches:
                setattr(cls, _attribute(key), _originals[key])
    _originals.clear()


class _TorchMetrics:
    """torchmetrics as a ``front_end.FrontEnd``: patched while strategies live, once it is imported."""

    name = "torchmetrics"
    _live = False

    def on_scope_entry(self, strategy: Any) -> None:
        if self._live and not _originals:
            _patch()

    def install(self) -> Callable[[], None]:
        type(self)._live = True
        _patch()

        def remove() -> None:
            type(self)._live = False
            _unpatch()

        return remove


FRONT_END = _TorchMetrics()
