"""A buffer replaced inside ``strategy.run`` on a module that every local replica shares.

A module built outside ``strategy.scope()`` (DINO's ``DINOLoss``, built before the model is wrapped)
keeps plain buffers, one set for all the replicas of a process: a step that assigns a new tensor to
one (``self.center = self.center * m + batch_center * (1 - m)``) would have each replica read what
another replica already wrote, so the update runs once per replica, silently, in the threads' order.
Each DDP rank holds its own module. Refused (``ValueError``) before the write, with the fix; a module
built inside the replica function is that replica's own (noted at its first registration). A buffer
written in place (``self.center.mul_(m)``, a BatchNorm's running statistics) is found by its version
counter after the step function's first run (``BufferWatch``) and refused then.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import torch

from multidev.distribute.replica_dicts import _is_built_in_replica
from multidev.distribute.run_watches import RunWatches
from multidev.values.variables import DistributedVariable

#: Modules built inside a replica function (each replica's own): their first parameter or buffer was
#: registered there.
_built_in_replica: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def note_registration(module: torch.nn.Module) -> None:
    """A parameter or buffer registered inside a replica function: the module's first makes it the
    replica's own (a shared module registering a new buffer in the step already holds others)."""
    if not module.__dict__["_parameters"] and not module.__dict__["_buffers"]:
        _built_in_replica.add(module)


def check_buffer_write(module: torch.nn.Module, name: str, buffer: Any, env: Any) -> None:
    """Inside a run (``env``, the replica's): a buffer of a module shared by several local replicas
    replaced by a new tensor raises ``ValueError``."""
    old = module.__dict__["_buffers"].get(name)
    extended = env.strategy.extended
    plain = isinstance(old, torch.Tensor) and not isinstance(old, DistributedVariable)
    shared = (plain and module not in _built_in_replica and not _is_built_in_replica(old)
              and extended.num_local_replicas > 1 and extended.distributes_variables)
    if shared and buffer is not old:
        strategy = type(env.strategy).__name__
        raise ValueError(
            f"Assigning a new tensor to buffer {name!r} of {type(module).__name__} inside {strategy}.run: the module "
            f"was built outside {strategy}.scope(), so its one buffer is shared by all {extended.num_local_replicas} "
            "replicas of this process, and each replica would read the value another one already wrote (an "
            "update applied once per replica; each DDP rank holds its own module). Build the module inside "
            f"`with strategy.scope():` (each replica then updates its own copy of the buffer, as each rank does), "
            "or update it outside strategy.run.")
    note_registration(module)


class BufferWatch:
    """The plain buffers of shared modules (built outside the scope) that one guarded run of several local
    replicas met (``module_hooks.shared_module_guard``), with their version counters at first sight: one
    the step wrote in place (DINO's ``self.center.mul_(m).add_(...)``, a BatchNorm built outside the scope
    updating its running statistics in training mode) was written once per replica, on the one buffer
    they share, in the threads' order, where each DDP rank writes its own module's. Refused after the run
    (``refuse_written``), before the step function is trusted (the guard watches its first runs)."""

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy
        self.seen: dict[int, tuple] = {}

    def note(self, module: torch.nn.Module) -> None:
        """A module called in the run (the guard's forward pre-hook, in a replica thread)."""
        held = module.__dict__.get("_buffers")
        if module in _built_in_replica or not isinstance(held, dict):   # (a ScriptModule's: module_hooks refuses it)
            return
        for name, buffer in dict.items(held):
            if isinstance(buffer, torch.Tensor) and not isinstance(buffer, DistributedVariable) \
                    and not _is_built_in_replica(buffer):   # (a replica's deep copy's: its own)
                self.seen.setdefault(id(buffer), (buffer, buffer._version, module, name))

    def refuse_written(self) -> None:
        """After a successful run: ``ValueError`` naming a buffer the replicas wrote in place."""
        written = [(module, name) for buffer, version, module, name in self.seen.values()
                   if buffer._version != version]
        self.seen.clear()
        if not written:
            return
        module, name = written[0]
        strategy = type(self.strategy).__name__
        replicas = self.strategy.extended.num_local_replicas
        raise ValueError(
            f"strategy.run wrote buffer {name!r} of {type(module).__name__} in place, but the module was built outside "
            f"{strategy}.scope(): it is one object for all {replicas} replicas of this process, so the write ran once "
            "per replica on its one buffer (each DDP rank holds its own module and writes its own). Build the module "
            f"inside `with strategy.scope():` (each replica then updates its own copy of the buffer, as each rank "
            "does); call it in eval mode if it should not update (a BatchNorm's running statistics); or make the "
            f"update outside strategy.run. (Refused after this run, which already made the {replicas} writes.)")


_WATCHES = RunWatches()


def watching(strategy: Any) -> contextlib.AbstractContextManager[BufferWatch]:
    """Note the buffers of the modules the run inside calls (caller thread, around the replicas' tasks)."""
    return _WATCHES.watching(strategy, BufferWatch(strategy))


def note_module(module: torch.nn.Module, env: Any) -> None:
    """A module called in a replica (the guard's forward pre-hook): its buffers, if the run is watched."""
    watch = _WATCHES.get(id(env.strategy)) if _WATCHES else None
    if watch is not None:
        watch.note(module)
