"""Shipping scheduled functions to workers: cloudpickle with references to cluster objects.

A scheduled function is usually a closure over the model, the optimizer and the strategy. It is
pickled by value (cloudpickle), except for objects that must not be copied: a ps variable travels
as a reference (its id; the worker keeps one local copy per variable, refreshed from the ps), the
strategy as a reference to the worker's stand-in, and per-worker values (datasets, iterators) as
references to the worker's own. A trainable parameter that is not a ps variable (a model built
outside the scope) is refused: each worker would silently train its own copy. RPC payloads are
pickles: see docs/parameter_server.md (trusted networks only).
"""

from __future__ import annotations

import io
import pickle
import threading
from typing import Any, Callable

import cloudpickle
import torch

from multidev.distribute.parameter_server.variables import PSVariable, VariableSpec

STRATEGY_REF = ("strategy",)
_LOCK_TYPES = {type(threading.Lock()): ("lock",), type(threading.RLock()): ("rlock",)}


class Reference:
    """An object sent by reference: the worker resolves ``key`` to its own value."""

    _ps_reference: tuple

    def __init__(self, key: tuple):
        self._ps_reference = key


class _Pickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO, strategy: Any):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._strategy = strategy
        self.specs: dict[int, VariableSpec] = {}

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, PSVariable):
            spec = obj._spec
            self.specs[spec.vid] = spec
            return ("var", spec.vid)
        if isinstance(obj, torch.nn.Parameter) and obj.requires_grad:
            raise LocalParameterError(_local_parameter_message(obj))
        if isinstance(obj, torch.nn.Module):     # also a Keras 3 model, which pickles as a saved file
            local = next((p for p in obj.parameters() if p.requires_grad and not isinstance(p, PSVariable)), None)
            if local is not None:
                raise LocalParameterError(_local_parameter_message(local))
        if obj is self._strategy and obj is not None:
            return STRATEGY_REF
        if isinstance(obj, Reference):
            return obj._ps_reference
        return _LOCK_TYPES.get(type(obj))  # a lock guards one process: the worker gets a fresh one


class LocalParameterError(ValueError):
    """A scheduled function captures a trainable parameter that does not live on the parameter servers."""


def _local_parameter_message(param: torch.nn.Parameter) -> str:
    return (
        f"A scheduled function uses a trainable parameter of shape {tuple(param.shape)} that is not stored on the "
        "parameter servers: its model was built outside ParameterServerStrategy.scope(). Each worker would "
        "train its own copy and the coordinator would never see the updates. Build the model (and its "
        "optimizer and metrics) inside `with strategy.scope():`. Keras 3 models are not distributed by "
        "ParameterServerStrategy: use md.keras there."
    )


def dumps(obj: Any, strategy: Any) -> tuple[bytes, dict[int, VariableSpec]]:
    """Pickle ``obj`` for a worker; returns the bytes and the specs of the ps variables it refers to.

    Raises:
        ValueError: ``obj`` captures a trainable parameter created outside the strategy's scope.
        TypeError: ``obj`` cannot be pickled.
    """
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, strategy)
    try:
        pickler.dump(obj)
    except LocalParameterError as err:
        raise LocalParameterError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - many pickling failures, one message
        raise TypeError(
            f"Cannot send {obj!r} to the workers: {type(err).__name__}: {err}. A scheduled function and its "
            "arguments are pickled (cloudpickle); capture models, optimizers, tensors and plain Python values, "
            "not open files, locks or threads."
        ) from err
    return buffer.getvalue(), pickler.specs


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, resolve: Callable[[tuple], Any]):
        super().__init__(file)
        self._resolve = resolve

    def persistent_load(self, pid: Any) -> Any:
        key = tuple(pid)
        if key == ("lock",):
            return threading.Lock()
        if key == ("rlock",):
            return threading.RLock()
        return self._resolve(key)


def loads(data: bytes, resolve: Callable[[tuple], Any]) -> Any:
    """Unpickle what ``dumps`` produced, resolving references with ``resolve(key)``."""
    return _Unpickler(io.BytesIO(data), resolve).load()


__all__ = ["dumps", "loads", "Reference", "STRATEGY_REF"]
