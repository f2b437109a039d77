"""A buffer replaced inside ``strategy.run`` on a module that every local replica shares.

A module built outside ``strategy.scope()`` (DINO's ``DINOLoss``, built before the model is wrapped)
keeps plain buffers, one set for all the replicas of a process: a step that assigns a new tensor to
one (``self.center = self.center * m + batch_center * (1 - m)``) would have each replica read what
another replica already wrote, so the update runs once per replica, silently, in the threads' order.
Each DDP rank holds its own module. Refused (``ValueError``) before the write, with the fix; a module
built inside the replica function is that replica's own (noted at its first registration).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

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
    shared = (plain and module not in _built_in_replica
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
