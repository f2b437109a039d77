"""Run a shared object's method once per step when every local replica calls it.

A PyTorch program's step function calls training utilities on objects the replicas share: an LR
scheduler, a ``GradScaler``, an ``AveragedModel`` whose counter is one tensor. Under DDP each
process has its own object and calls it once; here the replicas' threads call one object N times.
``once`` is the one meeting they all use: the local replicas meet, the last to arrive runs the
method once in cross-replica context (the strategy's scope) with what every replica handed in, and
every replica gets that one result. Meeting there also orders the call after everything each
replica did before it in the step (its ``optimizer.step()``, its ``unscale_``).

Example (a wrapper of ``step``)::

    env = several_local_replicas()
    if env is None:
        return step(self, *args)
    return once(env, ("lr_scheduler.step", type(self).__name__), args,
                lambda every: step(self, *every[0]))     # replica 0's arguments
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev.values import context


def several_local_replicas() -> context.ReplicaEnv | None:
    """The calling replica's environment when several local replicas run the step (so they share
    the step function's Python objects); None in cross-replica context or with one local replica."""
    env = context.replica_env()
    if env is None or env.strategy.extended.num_local_replicas == 1:
        return None
    return env


def several_replicas() -> context.ReplicaEnv | None:
    """The calling replica's environment when the step runs on several replicas in all (local or on
    other workers: a value they must agree on needs the meeting even with one replica per worker);
    None in cross-replica context or with one replica in all."""
    env = context.replica_env()
    if env is None or env.strategy.num_replicas_in_sync == 1:
        return None
    return env


def once(env: context.ReplicaEnv, key: tuple, payload: Any, run: Callable[[list], Any]) -> Any:
    """Meet the other local replicas at ``key`` (equal on every replica); the last to arrive calls
    ``run(payloads)`` (every replica's ``payload``, replica order) once, in cross-replica context
    and the strategy's scope; every replica returns its result (an error raised there reaches every
    replica)."""
    strategy = env.strategy

    def combine(payloads: list) -> list:
        with context.cross_replica(strategy):
            result = run(payloads)
        return [result] * len(payloads)

    return strategy.extended.replica_group.exchange(env.replica_id, key, payload, combine)


def sum_over_workers(strategy: Any, number: float) -> float:
    """``number`` (this worker's) summed over every worker; call it in cross-replica context, once per
    worker (``once``'s ``run``): it is a collective across workers."""
    extended = strategy.extended
    if extended.num_workers == 1:
        return number
    return float(extended.worker_collective.sum(torch.tensor(number, dtype=torch.float64)))


def mean_over_replicas(strategy: Any, values: list) -> float:
    """The mean of every replica's number (``values``: this worker's replicas, any of Python
    numbers, numpy scalars, one-element tensors), over every worker's replicas (``sum_over_workers``)."""
    total = sum(float(v.detach() if isinstance(v, torch.Tensor) else v) for v in values)
    return sum_over_workers(strategy, total) / strategy.num_replicas_in_sync
