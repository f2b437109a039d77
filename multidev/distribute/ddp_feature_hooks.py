"""DDP's wrapper, ``ZeroRedundancyOptimizer`` and ``Join`` over a strategy's variables: torch's where they work,
refused naming multidev's way where they cannot.

A DDP program ported by two lines may keep ``model = DistributedDataParallel(model)``, its
``ZeroRedundancyOptimizer`` and its uneven-input ``with model.join():``. Each is one torch.distributed
rank's object: with the program's own process group and one replica per process (``multidev launch``
with ``init_process_group`` kept) the wrapper and ZeRO give DDP's weights (the wrapper all-reduces
gradients ``loss.backward()`` already averaged, leaving them as they are; ZeRO's shards are the
workers'). Without a process group (multidev starts none: torch's error names ``init_process_group``,
the wrong fix) or with several replicas in the process (threads sharing one rank: DDP's C++ reducer
would pair their collectives, or hang) they are refused when built, saying what to do instead.
``Join`` shadows DDP's and ZeRO's collectives for a rank that ran out of input, never the strategy's
own gradient all-reduce, which the other workers would wait for until the collective timeout: over a
strategy's variables it is refused in every layout (``enable=False`` does nothing and passes), naming ``experimental_distribute_dataset``, which
keeps every replica in step (an empty batch for one without examples left, whose zero gradient counts
in the average: DDP's ``join(divide_by_initial_world_size=True)``).

``ZeroRedundancyOptimizer`` is guarded when ``torch.distributed.optim`` was imported before the first
strategy (importing it costs a second; programs import it at the top): one imported later meets
torch.distributed's own refusals (``torch_distributed_hooks``) when it asks for its rank.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Iterable

import torch
import torch.distributed as dist

from multidev.values import context
from multidev.values.variables import DistributedVariable

_ZERO_MODULE = "torch.distributed.optim.zero_redundancy_optimizer"


def _tensors(obj: Any) -> Iterable[torch.Tensor]:
    """The tensors a DDP/ZeRO/Join argument trains: a module's parameters, an optimizer's, a param list's."""
    if isinstance(obj, torch.nn.Module):
        return obj.parameters()
    if isinstance(obj, torch.optim.Optimizer):
        return (p for group in obj.param_groups for p in group["params"])
    return (p for item in obj for p in (item["params"] if isinstance(item, dict) else [item]))


def _strategy_of(tensors: Iterable[torch.Tensor]) -> Any | None:
    """The strategy whose scope made one of ``tensors``, else the one in scope here, else None."""
    for t in tensors:
        if isinstance(t, DistributedVariable):
            return t.distribute_strategy
    return context.current_scope_strategy()


def _layout_problem(strategy: Any) -> str | None:
    """Why a torch.distributed rank's object cannot serve ``strategy``'s replicas (None: it can)."""
    replicas = strategy.extended.num_local_replicas
    if replicas > 1:
        return (f"{type(strategy).__name__} runs {replicas} replicas in this process, threads that would share "
                "one torch.distributed rank")
    if not dist.is_initialized():
        return "multidev starts no torch.distributed process group (the replicas are not ranks)"
    return None


def _ddp_refusal(strategy: Any, problem: str) -> ValueError:
    return ValueError(
        f"DistributedDataParallel(model) under {type(strategy).__name__}: {problem}. The strategy already does what "
        "DDP does (one copy of the model per replica, gradients averaged across replicas in loss.backward()): "
        "build the model in strategy.scope() and drop the wrapper: call model(x) in strategy.run, model.module -> "
        "model, model.no_sync() -> nothing to skip (.grad accumulates the averaged gradients: the same sum), "
        "model.join() -> not needed (strategy.experimental_distribute_dataset keeps the replicas in step). With "
        "one replica per process and your own init_process_group (multidev launch) the wrapper is torch's. "
        "See docs/ddp_port.md.")


def _zero_refusal(strategy: Any, problem: str) -> ValueError:
    return ValueError(
        f"ZeroRedundancyOptimizer under {type(strategy).__name__}: {problem}; it shards the optimizer state across "
        "torch.distributed ranks and broadcasts each rank's update. Build the optimizer_class itself in "
        "strategy.scope() instead, e.g. torch.optim.AdamW(model.parameters(), lr=...) for "
        "ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=...): the same updates "
        "(ZeRO partitions the state, not the arithmetic). With one replica per process and your own "
        "init_process_group (multidev launch) ZeroRedundancyOptimizer is torch's. See docs/ddp_port.md.")


def _join_refusal(strategy: Any) -> ValueError:
    return ValueError(
        f"Join (model.join()) over a model or optimizer of {type(strategy).__name__}.scope(): Join shadows "
        "DistributedDataParallel's and ZeroRedundancyOptimizer's collectives for a rank that ran out of input, not "
        "the strategy's gradient all-reduce in loss.backward(), which the other replicas would wait for until the "
        "collective timeout. Drop the Join: iterate strategy.experimental_distribute_dataset(loader), which keeps "
        "every replica and worker in step (a replica without examples left gets an empty batch; its zero gradient "
        "counts in the average, as DDP's join(divide_by_initial_world_size=True)), or give the workers a "
        "DistributedSampler(..., drop_last=False), which pads every worker to the same number of batches. "
        "See docs/ddp_port.md.")


def _check_ddp(module: Any, args: tuple, kwargs: dict) -> Any:
    """``DistributedDataParallel(module, ...)``: torch's where the layout allows it."""
    strategy = _strategy_of(module.parameters()) if isinstance(module, torch.nn.Module) else None
    problem = _layout_problem(strategy) if strategy is not None else None
    if problem is not None:
        raise _ddp_refusal(strategy, problem)
    return module


def _check_zero(params: Any, args: tuple, kwargs: dict) -> list:
    """``ZeroRedundancyOptimizer(params, optimizer_class, ...)``: torch's where the layout allows it."""
    params = list(params)   # (a generator, read once here and once by torch)
    strategy = _strategy_of(_tensors(params))
    problem = _layout_problem(strategy) if strategy is not None else None
    if strategy is not None and problem is None and kwargs.get("overlap_with_ddp"):
        problem = "overlap_with_ddp=True steps inside DDP's gradient hook, not after the strategy's reduction"
    if problem is not None:
        raise _zero_refusal(strategy, problem)
    return params


def _check_join(joinables: Any, args: tuple, kwargs: dict) -> list:
    """``Join(joinables, enable=True, ...)``: refused over a strategy's variables unless disabled."""
    joinables = list(joinables)
    if not kwargs.get("enable", args[0] if args else True):
        return joinables
    for joinable in joinables:   # a DDP's parameters are its module's
        if isinstance(joinable, (torch.nn.Module, torch.optim.Optimizer)):
            found = [t for t in _tensors(joinable) if isinstance(t, DistributedVariable)]
            if found:
                raise _join_refusal(found[0].distribute_strategy)
    return joinables


def _guard(check: Callable, name: str) -> Callable[[Callable], Callable]:
    """A constructor that runs ``check`` on its first argument (``name``, positional or not) before torch's."""
    def wrap(original: Callable) -> Callable:
        @functools.wraps(original)
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if args:
                args = (check(args[0], args[1:], kwargs), *args[1:])
            elif name in kwargs:
                kwargs[name] = check(kwargs[name], (), kwargs)
            original(self, *args, **kwargs)
        return __init__
    return wrap


def _targets() -> list[tuple[type, Callable[[Callable], Callable]]]:
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel
    targets = [(DistributedDataParallel, _guard(_check_ddp, "module")), (Join, _guard(_check_join, "joinables"))]
    zero = sys.modules.get(_ZERO_MODULE)
    if zero is not None:
        targets.append((zero.ZeroRedundancyOptimizer, _guard(_check_zero, "params")))
    return targets


def install() -> Callable[[], None]:
    """Guard the constructors; returns how to put torch's back (``live_hooks.STRATEGY_HOOKS`` calls both
    while strategies live)."""
    if not dist.is_available():
        return lambda: None
    originals = []
    for cls, guard in _targets():
        original = cls.__dict__["__init__"]
        if not getattr(original, "_multidev_wrapped", False):
            wrapped = guard(original)
            wrapped._multidev_wrapped = True
            cls.__init__ = wrapped
            originals.append((cls, original))
    return lambda: [setattr(cls, "__init__", original) for cls, original in originals]
