"""What a worker task does: run scheduled functions and hold its per-worker datasets and iterators.

These functions run on a ``worker`` task, called over RPC by the coordinator's dispatcher. A
function is unpickled once and cached by key; before each run the worker refreshes, from the
parameter servers, its local copies of the variables the function uses. Errors never escape as
RPC failures: the reply says ``ok``, ``error`` (the function raised) or ``unavailable`` (a
parameter server was lost), so that the coordinator can tell them from a worker that died.
"""

from __future__ import annotations

import pickle
import threading
import traceback
from typing import Any

import torch

from multidev._core.errors import OutOfRangeError, UnavailableError
from multidev.distribute.parameter_server import pickling
from multidev.distribute.parameter_server.variables import (PSVariable, VariableSpec, from_spec, pull,
                                                            push_increments, snapshot_increments)
from multidev.distribute.parameter_server.worker_strategy import WorkerStrategy


class _WorkerState:
    def __init__(self) -> None:
        self.strategy: WorkerStrategy | None = None
        self.functions: dict[int, tuple[Any, list[PSVariable]]] = {}
        self.variables: dict[int, PSVariable] = {}
        self.values: dict[int, Any] = {}
        self.lock = threading.Lock()


_state = _WorkerState()


def configure(worker_index: int, num_workers: int) -> None:
    """Called by the worker's server at start-up."""
    _state.strategy = WorkerStrategy(worker_index, num_workers)


class _Loader:
    """Resolves references while unpickling, collecting the ps variables used."""

    def __init__(self, specs: dict[int, VariableSpec]):
        self.specs = specs
        self.used: dict[int, PSVariable] = {}

    def __call__(self, key: tuple) -> Any:
        kind = key[0]
        if kind == "var":
            return self._variable(key[1])
        if key == pickling.STRATEGY_REF:
            return _state.strategy
        if kind == "per_worker":
            try:
                return _state.values[key[1]]
            except KeyError:
                raise LookupError(f"Per-worker value {key[1]} does not exist on this worker (create it with "
                                  "coordinator.create_per_worker_dataset before scheduling).") from None
        raise pickle.UnpicklingError(f"Unknown reference {key!r} in a scheduled function.")

    def _variable(self, vid: int) -> PSVariable:
        var = _state.variables.get(vid)
        if var is None:
            var = _state.variables[vid] = from_spec(self.specs[vid])
        self.used[vid] = var
        return var


def _load(blob: bytes, specs: dict[int, VariableSpec]) -> tuple[Any, list[PSVariable]]:
    loader = _Loader(specs)
    return pickling.loads(blob, loader), list(loader.used.values())


def _portable(err: BaseException) -> BaseException:
    """The exception itself when it pickles, else a RuntimeError carrying its text."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        pickle.loads(pickle.dumps(err))
        err.__notes__ = list(getattr(err, "__notes__", [])) + [f"Raised on the worker:\n{text}"]
        return err
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(err).__name__}: {err}\nRaised on the worker:\n{text}")


def _plain(value: Any) -> Any:
    if isinstance(value, PSVariable):
        return value.read_value()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def run_function(key: int, blob: bytes | None, args_blob: bytes, specs: dict[int, VariableSpec]) -> tuple:
    """Run scheduled function ``key`` (unpickled from ``blob`` the first time) on pickled arguments."""
    try:
        with _state.lock:
            if key not in _state.functions:
                if blob is None:
                    return ("missing", key)
                _state.functions[key] = _load(blob, specs)
            fn, used = _state.functions[key]
            (args, kwargs), arg_vars = _load(args_blob, specs)
            pull(used + arg_vars)
            snapshots = snapshot_increments(used + arg_vars)
            result = _plain(fn(*args, **kwargs))
            push_increments(snapshots)          # metric updates reach the ps (summed over workers)
            return ("ok", result)
    except UnavailableError as err:
        return ("unavailable", str(err))
    except StopIteration:
        return ("error", OutOfRangeError(
            "End of sequence: a per-worker iterator ran out of data inside a scheduled function. Make the "
            "dataset repeat (dataset.repeat()) for parameter-server training."))
    except BaseException as err:  # noqa: BLE001 - reported to the coordinator, re-raised there
        return ("error", _portable(err))


def create_value(value_id: int, blob: bytes, specs: dict[int, VariableSpec]) -> tuple:
    """Build a per-worker value: call the pickled zero-argument function (a dataset function)."""
    try:
        with _state.lock:
            fn, used = _load(blob, specs)
            pull(used)
            _state.values[value_id] = fn()
        return ("ok", None)
    except BaseException as err:  # noqa: BLE001
        return ("error", _portable(err))


def make_iterator(value_id: int, source_id: int) -> tuple:
    """``iter()`` of per-worker value ``source_id`` on this worker, stored as ``value_id``."""
    try:
        with _state.lock:
            _state.values[value_id] = iter(_state.values[source_id])
        return ("ok", None)
    except BaseException as err:  # noqa: BLE001
        return ("error", _portable(err))


__all__ = ["configure", "run_function", "create_value", "make_iterator"]
