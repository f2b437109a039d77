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
without a group, so timm's ``if args.distributed`` branches stay off); only their error without a
group names multidev's fix instead of ``init_process_group``: for ``get_world_size``/``get_rank``
(``if dist.get_rank() == 0:`` logging and saving, ``DistributedSampler(dataset)``) the job's layout,
for ``barrier`` why none is needed, for a metric's ``all_reduce`` ``strategy.reduce``. Answering
with the layout instead would make torch's rank queries lie to any other code that asks (and a
sampler of a job's replicas is the wrong one: ``docs/ddp_port.md``). ``torch.distributed.nn``'s
differentiable collectives (CLIP's gathered loss) are refused alike, naming the replica context's
differentiable ``all_gather`` and ``all_reduce``. A tensor in autograd's graph given to ``torch.distributed``'s
``all_reduce`` or ``all_gather`` (Barlow Twins' ``all_reduce(c)`` in ``forward``) gets the spelling that keeps
DDP's gradient: autograd does not see those collectives, the replica context's are differentiable.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import torch.distributed as dist

from multidev.values import context

#: torch.distributed's collectives and rank queries (those this torch has).
_NAMES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce", "reduce_scatter",
          "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "gather", "gather_object", "scatter",
          "scatter_object_list", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "get_rank",
          "get_world_size")


#: torch.distributed.nn.functional's differentiable collectives (CLIP's and SimCLR's gathered losses).
_NN_NAMES = ("all_gather", "all_reduce", "broadcast", "gather", "scatter", "reduce", "reduce_scatter", "all_to_all",
             "all_to_all_single")
_NN_FIX = (
    " torch.distributed.nn.functional's collectives are differentiable: so are the replica context's, "
    "torch.cat(all_gather(z)) -> md.distribute.get_replica_context().all_gather(z, axis=0) (every replica's "
    "rows in replica order; each replica's gradient sums every replica's loss at its own rows), "
    "all_reduce(t) -> get_replica_context().all_reduce('sum', t).")


# torch.distributed's collectives autograd does not see: under DDP a tensor in the graph keeps its own gradient.
_GRAD_FIX = {
    "torch.distributed.all_reduce": (
        " The tensor requires grad (Barlow Twins' cross-correlation `c`): autograd does not see torch.distributed."
        "all_reduce, so under DDP its gradient passes through to each rank's own tensor unreduced, while the "
        "replica context's all_reduce is differentiable (its gradient all-reduced too: the world size times "
        "DDP's gradient here). For DDP's numbers write "
        "`c = md.distribute.get_replica_context().all_reduce('sum', c.detach()) + (c - c.detach())`."),
    "torch.distributed.all_gather": (
        " The tensor requires grad: torch.distributed.all_gather's copies carry no gradient under DDP (only the "
        "rank's own tensor, where the program puts it back), while the replica context's all_gather is "
        "differentiable. For DDP's numbers gather `z.detach()`: "
        "`md.distribute.get_replica_context().all_gather(z.detach(), axis=0)`."),
}


def _requires_grad(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether the tensor given to an all-reduce (``tensor``) or an all-gather (``tensor``, its 2nd) is in
    autograd's graph. Not inside an ``autograd.Function``'s ``forward`` (grad mode off there): its own
    ``backward`` says what the gradient is (VICReg's ``FullGatherLayer``: the differentiable gather)."""
    at = 0 if name.endswith("all_reduce") else 1
    tensor = kwargs.get("tensor", args[at] if len(args) > at else None)
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def _refusal(name: str, env: Any, args: tuple = (), kwargs: dict | None = None) -> ValueError:
    strategy = type(env.strategy).__name__
    n = env.strategy.num_replicas_in_sync
    return ValueError(
        f"{name} inside strategy.run: {strategy}'s {n} replica(s) are not torch.distributed "
        "ranks (multidev starts no process group; the replicas of one process would share one). Inside the "
        "step reduce with md.distribute.get_replica_context().all_reduce('sum', value) (a mean: 'mean'; a gather: "
        "all_gather(value, axis=0)), or return the value and call strategy.reduce('mean', value, axis=None) after "
        "strategy.run; the rank is get_replica_context().replica_id_in_sync_group, the world size "
        "strategy.num_replicas_in_sync (a DDP program's `if rank == 0:` logging: strategy.extended.worker_index == 0 "
        "outside the step)." + (_NN_FIX if name.startswith("torch.distributed.nn") else "")
        + (_GRAD_FIX[name] if name in _GRAD_FIX and _requires_grad(name, args, kwargs or {}) else ""))


_RANK_FIX = (
    "A DDP program's `if dist.get_rank() == 0:` (logging, torch.save) is `if strategy.extended.worker_index == 0:` "
    "outside strategy.run, dist.get_world_size() the job's strategy.extended.num_workers (its replicas: "
    "strategy.num_replicas_in_sync). A ZeroRedundancyOptimizer asks it too (when torch.distributed.optim was "
    "imported after the strategy): build its optimizer_class in strategy.scope() instead. "
    "DistributedSampler(dataset) calls it without num_replicas and rank: give the "
    "sampler the job's workers: DistributedSampler(dataset, num_replicas=strategy.extended.num_workers, "
    "rank=strategy.extended.worker_index) (each loader batch is then this worker's share, split across its "
    "replicas), or drop the sampler and give every worker the same global batches (the strategy splits them "
    "across all replicas).")
_BARRIER_FIX = (
    "MirroredStrategy's replicas are threads of this process (nothing to wait for), and the workers of "
    "MultiWorkerMirroredStrategy meet at every step's gradient all-reduce. For a barrier of your own (rank 0 "
    "writes what the others read) keep your init_process_group(...) (multidev launch sets MASTER_ADDR and "
    "MASTER_PORT): torch.distributed then works outside strategy.run.")
_COLLECTIVE_FIX = (
    "Return the value from the step and reduce it after strategy.run with strategy.reduce('sum', value, "
    "axis=None) (or 'mean'), across every worker's replicas; inside the step "
    "md.distribute.get_replica_context().all_reduce('sum', value) (all_gather(value, axis=0)). Or keep your "
    "init_process_group(...) (multidev launch sets MASTER_ADDR and MASTER_PORT) for torch.distributed outside "
    "strategy.run.")


def _no_process_group(name: str, where: str) -> ValueError:
    """torch's ``ValueError`` for a call without a process group, saying what to do in multidev."""
    fix = (_RANK_FIX if name in ("get_rank", "get_world_size")
           else _BARRIER_FIX if name in ("barrier", "monitored_barrier") else _COLLECTIVE_FIX)
    return ValueError(f"Default process group has not been initialized ({where}.{name}): multidev starts "
                      f"no process group. {fix} See docs/ddp_port.md.")


def _guarded(name: str, original: Callable, where: str = "torch.distributed") -> Callable:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        env = context.replica_env()
        if env is not None and (env.strategy.extended.num_local_replicas > 1 or not dist.is_initialized()):
            raise _refusal(f"{where}.{name}", env, args, kwargs)
        if env is not None or dist.is_initialized():
            return original(*args, **kwargs)
        try:   # torch's own call: one given its group (torch.distributed.rpc's) needs no default group
            return original(*args, **kwargs)
        except ValueError as e:
            if "Default process group has not been initialized" not in str(e):
                raise
            raise _no_process_group(name, where) from e

    call._multidev_wrapped = True
    return call


def _wrap(namespace: Any, names: tuple, where: str) -> Callable[[], None]:
    originals = {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
    originals = {name: fn for name, fn in originals.items() if not getattr(fn, "_multidev_wrapped", False)}
    for name, fn in originals.items():
        setattr(namespace, name, _guarded(name, fn, where))
    return lambda: [setattr(namespace, name, fn) for name, fn in originals.items()]


def install() -> Callable[[], None]:
    """Wrap torch.distributed's functions (and ``torch.distributed.nn``'s differentiable ones, in both of its
    namespaces); returns how to put torch's back (``live_hooks.STRATEGY_HOOKS`` calls both while strategies
    live)."""
    if not dist.is_available():
        return lambda: None
    import torch.distributed.nn as dist_nn   # (2 ms)
    import torch.distributed.nn.functional as dist_nn_functional
    removers = [_wrap(dist, _NAMES, "torch.distributed"),
                _wrap(dist_nn_functional, _NN_NAMES, "torch.distributed.nn.functional"),
                _wrap(dist_nn, _NN_NAMES, "torch.distributed.nn")]
    return lambda: [remove() for remove in removers]
