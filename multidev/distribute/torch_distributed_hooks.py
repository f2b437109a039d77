"""``torch.distributed`` called inside ``strategy.run``: refused, naming multidev's equivalent.

A DDP program reduces its own metrics in the step (apex's and the ImageNet example's
``reduce_tensor``: ``dist.all_reduce(rt); rt /= world_size``) and asks ``dist.get_rank()`` who
logs. Ported with two lines, the step runs on replicas, which are no ``torch.distributed`` ranks:
without a process group torch's error names ``init_process_group``, the wrong fix; with one the
program kept (``init_process_group`` under ``MultiWorkerMirroredStrategy``), every local replica
would join the process's one collective, pairing other replicas' tensors or hanging. So while a
strategy lives (``live_hooks``) torch.distributed's collectives and rank queries raise
``ValueError`` inside a replica, naming the replica context's ``all_reduce``, ``strategy.reduce``,
``replica_id_in_sync_group`` and ``num_replicas_in_sync``; only a process group the program
started, with one replica per process (whose ranks are then the replicas), passes through.
Outside ``strategy.run`` torch's functions behave as torch's (``dist.is_initialized()`` is False
without a group, so timm's ``if args.distributed`` branches stay off); only the error of
``get_world_size``/``get_rank`` without a group (what ``DistributedSampler(dataset)`` calls, DDP's
input kept by a two-line port) names multidev's fix, the job's layout, instead of
``init_process_group``. Answering with the layout instead would make torch's rank queries lie to
any other code that asks (and a sampler of a job's replicas is the wrong one: ``docs/ddp_port.md``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch.distributed as dist

from multidev.values import context

#: torch.distributed's collectives and rank queries (those this torch has).
_NAMES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce", "reduce_scatter",
          "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "gather", "gather_object", "scatter",
          "scatter_object_list", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "get_rank",
          "get_world_size")


def _refusal(name: str, env: Any) -> ValueError:
    strategy = type(env.strategy).__name__
    n = env.strategy.num_replicas_in_sync
    return ValueError(
        f"torch.distributed.{name} inside strategy.run: {strategy}'s {n} replica(s) are not torch.distributed "
        "ranks (multidev starts no process group; the replicas of one process would share one). Inside the "
        "step reduce with md.distribute.get_replica_context().all_reduce('sum', value) (a mean: 'mean'), or "
        "return the value and call strategy.reduce('mean', value, axis=None) after strategy.run; the rank is "
        "get_replica_context().replica_id_in_sync_group, the world size strategy.num_replicas_in_sync "
        "(a DDP program's `if rank == 0:` logging: strategy.extended.worker_index == 0 outside the step).")


def _no_process_group(name: str) -> ValueError:
    """torch's ``ValueError`` for a rank query without a process group, saying what to do in multidev."""
    return ValueError(
        f"Default process group has not been initialized (torch.distributed.{name}, which "
        "DistributedSampler(dataset) calls without num_replicas and rank): multidev starts no process group. "
        "Give the sampler the job's workers: DistributedSampler(dataset, num_replicas="
        "strategy.extended.num_workers, rank=strategy.extended.worker_index) (each loader batch is then this "
        "worker's share, split across its replicas), or drop the sampler and give every worker the same global "
        "batches (the strategy splits them across all replicas). See docs/ddp_port.md.")


def _guarded(name: str, original: Callable) -> Callable:
    rank_query = name in ("get_rank", "get_world_size")

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        env = context.replica_env()
        if env is not None and (env.strategy.extended.num_local_replicas > 1 or not dist.is_initialized()):
            raise _refusal(name, env)
        if rank_query and env is None and not dist.is_initialized():
            raise _no_process_group(name)
        return original(*args, **kwargs)

    call._multidev_wrapped = True
    return call


def install() -> Callable[[], None]:
    """Wrap torch.distributed's functions; returns how to put torch's back (``live_hooks.STRATEGY_HOOKS``
    calls both while strategies live)."""
    if not dist.is_available():
        return lambda: None
    originals = {name: getattr(dist, name) for name in _NAMES if hasattr(dist, name)}
    originals = {name: fn for name, fn in originals.items() if not getattr(fn, "_multidev_wrapped", False)}
    for name, fn in originals.items():
        setattr(dist, name, _guarded(name, fn))
    return lambda: [setattr(dist, name, fn) for name, fn in originals.items()]
