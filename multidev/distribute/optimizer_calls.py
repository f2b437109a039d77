"""``optimizer.add_param_group(...)`` and ``optimizer.load_state_dict(...)`` inside ``strategy.run``
happen once per step, as on each DDP rank, not once per replica; ``optimizer.state_dict()`` there is
the calling replica's own state, as each rank's.

A step function that unfreezes a layer (``add_param_group`` at step k) or rewinds its optimizer
(``load_state_dict`` of a saved dict) calls it on every replica, and the replicas share the one
optimizer object: the second ``add_param_group`` raised torch's "some parameters appear in more
than one parameter group", and concurrent ``load_state_dict`` calls replaced the groups and state
while another replica was reading them. Under DDP each process has its own optimizer and calls it
once. Here the local replicas meet (the strategy's replica group, as ``once_per_step`` does), the
last to arrive makes the call once, in cross-replica context, with replica 0's arguments, and every
replica continues on the result (its twin follows the new groups or state at its next ``step``).

Only optimizers that hold distributed variables meet: one with none yet (the first group of torch's
constructor; multidev's Keras rules over plain copies) never does. Optimizers the replicas build each
for itself inside the step (each its own object, as each rank's) meet too, and each makes its own call.

``state_dict()`` in the step (a checkpoint saved every k steps, a snapshot to rewind to) read the
user's optimizer, whose state is replica 0's: on the plans where every replica updates its own copies
(GPUs, several processes) another replica read it while replica 0 was still updating it (a torn
snapshot: its ``step`` counter one behind its moments). Inside ``strategy.run`` it now packs the
calling replica's twin (``optimizer_hooks``), which that replica alone updates, with the user's
``state_dict`` hooks run on the user's optimizer, as torch runs them.

torch has no hook for these methods, so while a strategy lives (``live_hooks``) ``install`` wraps
them on ``torch.optim.Optimizer`` (no ``torch.optim`` optimizer overrides them; a subclass that does
and calls ``super()`` reaches the wrapper).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from multidev.distribute import once_per_step, optimizer_hooks, replica_hyperparameters, replica_state
from multidev.values import context
from multidev.values.variables import DistributedVariable

_METHODS = ("add_param_group", "load_state_dict")


def _holds_distributed_variables(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the replicas may share ``optimizer`` (torch's constructor calls ``add_param_group``
    before ``param_groups`` holds anything)."""
    groups = optimizer.__dict__.get("param_groups", ())
    return any(isinstance(p, DistributedVariable) for g in groups for p in g["params"])


def _once_per_step(method: Callable) -> Callable:
    """``method`` made once per step for the local replicas of a shared optimizer (see the module)."""
    @functools.wraps(method)
    def wrapper(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        env = once_per_step.several_local_replicas()
        if env is None or getattr(self, "_multidev_twin", False) or not _holds_distributed_variables(self):
            result = method(self, *args, **kwargs)
            replica_hyperparameters.adopt(self)
            if not getattr(self, "_multidev_twin", False) and _holds_distributed_variables(self):
                # (asked again after the call: the constructor's add_param_group brings the variables)
                replica_state.convert(self)   # optimizer.state: each replica's entries in a run
            return result

        def combine(every: list) -> list:
            """Once with replica 0's arguments on one shared optimizer; each replica's own call on
            optimizers the replicas built each for itself."""
            with context.cross_replica(env.strategy):
                if all(o is every[0][0] for o, _, _ in every):
                    results = [method(every[0][0], *every[0][1], **every[0][2])] * len(every)
                else:
                    results = [method(o, *a, **k) for o, a, k in every]
                for o, _, _ in every:
                    replica_hyperparameters.adopt(o)
                    replica_state.convert(o)
                return results

        return env.strategy.extended.replica_group.exchange(
            env.replica_id, (f"Optimizer.{method.__name__}",), (self, args, kwargs), combine)

    wrapper._multidev_wrapped = True
    return wrapper


def _own_state(method: Callable) -> Callable:
    """``state_dict`` packing the calling replica's twin inside ``strategy.run`` (see the module)."""
    @functools.wraps(method)
    def state_dict(self: torch.optim.Optimizer) -> dict:
        env = context.replica_env()
        twin = self if env is None or getattr(self, "_multidev_twin", False) else \
            optimizer_hooks.replica_optimizer(self, env.replica_id)
        if twin is self:
            return method(self)
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        packed = method(twin)
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, packed)
            packed = packed if result is None else result
        return packed

    state_dict._multidev_wrapped = True
    return state_dict


def install() -> Callable[[], None]:
    """Wrap ``Optimizer.add_param_group``, ``load_state_dict`` and ``state_dict``; returns how to put
    torch's back (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    cls = torch.optim.Optimizer
    wrappers = dict.fromkeys(_METHODS, _once_per_step) | {"state_dict": _own_state}
    originals = {name: cls.__dict__[name] for name in wrappers
                 if not getattr(cls.__dict__[name], "_multidev_wrapped", False)}
    for name, original in originals.items():
        setattr(cls, name, wrappers[name](original))

    def remove() -> None:
        for name, original in originals.items():
            setattr(cls, name, original)

    return remove
