"""``AveragedModel.update_parameters`` (SWA, EMA) inside ``strategy.run`` advances once per step.

Under DDP every process has its own ``AveragedModel`` and updates it once a step from its own copy
of the model. Here the step function's ``ema.update_parameters(model)`` runs on every replica:

* built inside ``strategy.scope()`` (``ema = AveragedModel(model, ...)``), its averaged weights,
  buffers and its counter ``n_averaged`` are distributed variables, one copy per replica, so each
  replica updates its own copy from its copy of the model, as each DDP rank does: nothing to change
  (``module_hooks.ReplicaAwareDict`` keeps ``self.n_averaged += 1`` on the replica's copy);
* built outside the scope from a model built in it, the weights are still distributed (a
  distributed variable's ``deepcopy`` is one) but ``n_averaged`` is one plain tensor every replica
  would advance. The replicas then meet (``once_per_step.once``) and the last to arrive updates
  every replica's copies, one replica after another in that replica's environment, and advances
  ``n_averaged`` once.

An ``AveragedModel`` with other plain weights (a copy taken by hand, ``device=`` elsewhere) would
average them once per replica: refused with ``ValueError``. ``SWALR`` is an ``LRScheduler``
(``scheduler_hooks``); ``update_bn`` after training works through the cross-replica writes of
batch-norm statistics (``values.distributed_variable``).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable

import torch
from torch.optim import swa_utils

from multidev.distribute import once_per_step
from multidev.values import context
from multidev.values.variables import DistributedVariable

_ORIGINAL = swa_utils.AveragedModel.__dict__["update_parameters"]
_COUNTER = "n_averaged"


def _plain_tensors(averaged: torch.nn.Module) -> list[str]:
    """Names of the averaged model's tensors that are not distributed variables (one shared tensor)."""
    named = list(averaged.named_parameters()) + list(averaged.named_buffers())
    return [name for name, t in named if not isinstance(t, DistributedVariable)]


def _each_replica(averaged: Any, model: torch.nn.Module, envs: list) -> None:
    """Every replica's update, in its own environment, with the shared counter advanced once."""
    counter = averaged.n_averaged
    start = counter.clone()
    for env in envs:
        counter.copy_(start)
        token = context.enter_replica_env(env)
        try:
            with torch.cuda.stream(env.stream) if env.stream is not None else contextlib.nullcontext():
                _ORIGINAL(averaged, model)
        finally:
            context.exit_replica_env(token)
    averaged.n_averaged.copy_(start + 1)


def _update_parameters(averaged: Any, model: torch.nn.Module) -> None:
    env = once_per_step.several_local_replicas()
    if env is None:
        return _ORIGINAL(averaged, model)
    plain = _plain_tensors(averaged)
    if not plain:
        return _ORIGINAL(averaged, model)   # each replica its own copies, as each DDP rank
    if plain != [_COUNTER]:
        raise ValueError(
            f"{type(averaged).__name__}.update_parameters(model) inside strategy.run: its tensors {plain!r} are "
            f"single tensors every replica would average into (once per replica, not once per step). Build it "
            f"from a model created in {type(env.strategy).__name__}.scope(), preferably inside that scope: "
            f"`with strategy.scope(): ema = {type(averaged).__name__}(model, ...)`.")
    once_per_step.once(env, ("AveragedModel.update_parameters",), env,
                       lambda envs: _each_replica(averaged, model, envs))


def install() -> Callable[[], None]:
    """Wrap ``AveragedModel.update_parameters``; returns how to put torch's back
    (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    swa_utils.AveragedModel.update_parameters = functools.wraps(_ORIGINAL)(_update_parameters)

    def remove() -> None:
        swa_utils.AveragedModel.update_parameters = _ORIGINAL

    return remove
