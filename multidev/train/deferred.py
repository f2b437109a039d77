"""Deferred restoration: checkpoint values for variables that do not exist yet.

TensorFlow restores a checkpointed value into a variable when the variable is created (a lazily
built layer's kernel, an optimizer's slots). Here a restore that finds a module whose parameter
or buffer is not created yet records the value against ``(module, name)``; torch's global
parameter/buffer registration hooks (registered while a value waits) assign it the moment the module registers that name, then
run the callbacks waiting for that variable (an optimizer's slots for it).

Example:
    model = md.keras.Sequential([md.keras.layers.Dense(2)])     # not built: no kernel yet
    ckpt = md.train.Checkpoint(model=model); ckpt.restore(path)  # kernel value waits here
    model(torch.ones(1, 3))                                      # built: the kernel is the saved one
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Callable

import torch

from multidev.distribute import live_hooks
from multidev.values import context
from multidev.values.variables import Variable

_PENDING: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@dataclasses.dataclass
class PendingValue:
    """A saved value waiting for ``module.<name>`` to be created."""

    value: torch.Tensor
    key: str                         # its storage key in the checkpoint
    status: object                   # the load status that counts it as consumed
    callbacks: list = dataclasses.field(default_factory=list)   # fn(variable), after the value is in
    dependents: list = dataclasses.field(default_factory=list)  # keys those callbacks restore (slots)
    done: bool = False

    def waiting_keys(self, unused: set) -> set:
        """The unconsumed keys that wait for this variable (its value, its optimizer slots)."""
        return set() if self.done else {k for k in (self.key, *self.dependents) if k in unused}


def assign(target: torch.Tensor, value: torch.Tensor) -> None:
    """Write a checkpointed value into a variable: every copy of a distributed variable, as a
    cross-replica ``assign`` does (a sync-on-read SUM variable gets equal shares)."""
    if isinstance(target, Variable):
        target.assign(value.to(target.dtype))
        return
    with torch.no_grad():
        target.copy_(value.to(target.device, target.dtype))


class _Waiting(dict):
    """A module's pending values by name; while one exists (the module lives and some name waits), the
    registration hooks are installed (it owns them in ``_HOOKS``)."""

    __slots__ = ("__weakref__",)


def defer(module: torch.nn.Module, name: str, pending: PendingValue) -> None:
    """Assign ``pending.value`` to ``module.<name>`` when the module registers it."""
    with _LOCK:
        waiting = _PENDING.get(module)
        if waiting is None:
            waiting = _PENDING[module] = _Waiting()
            _HOOKS.acquire(waiting)
        waiting[name] = pending


def _on_register(module, name, tensor):
    if tensor is None or not _PENDING:
        return None
    with _LOCK:
        entries = _PENDING.get(module)
        pending = entries.pop(name, None) if entries else None
        if entries is not None and not entries:
            del _PENDING[module]   # frees its lease: the hooks go at the next sweep outside torch's loop
    if pending is None or pending.done:
        return None
    if tuple(tensor.shape) != tuple(pending.value.shape):
        raise ValueError(f"Received incompatible tensor with shape {tuple(pending.value.shape)} when attempting "
                         f"to restore variable {pending.key!r} (created with shape {tuple(tensor.shape)}) from "
                         "a checkpoint: the layer was built differently from the one that was saved.")
    # A variable created inside strategy.run: restore it as a cross-replica write (every copy gets the
    # saved value, no aggregation of "updates"), and load its optimizer slots the same way.
    with context.cross_replica():
        assign(tensor, pending.value)
        pending.status._consume(pending.key)
        pending.done = True
        for callback in pending.callbacks:
            callback(tensor)
    return None


def _install() -> Callable[[], None]:
    handles = [torch.nn.modules.module.register_module_parameter_registration_hook(_on_register),
               torch.nn.modules.module.register_module_buffer_registration_hook(_on_register)]
    return lambda: [h.remove() for h in handles]


# Installed while some value waits. The hook that takes the last one runs inside torch's loop over the
# registry, which removing it would break: they then stay (inert: one emptiness check per registration)
# until the next release or restore outside that loop (live_hooks.sweep).
_HOOKS = live_hooks.OwnedHooks("deferred restores", [_install])
