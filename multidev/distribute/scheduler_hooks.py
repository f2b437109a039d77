"""``lr_scheduler.step()`` inside ``strategy.run`` happens once per step, not once per replica.

Hugging Face's documented loop (and many others) call ``scheduler.step()`` right after
``optimizer.step()`` in the step function. The scheduler and the optimizer's ``param_groups`` are
one object shared by every local replica, so N replicas would advance the schedule N times a step.
Under DDP each process has its own scheduler and steps it once; here the replicas meet
(``once_per_step.once``) and the last to arrive steps the scheduler once, in cross-replica context,
with replica 0's arguments; every replica gets its result. Meeting there also orders the schedule
after every replica's ``optimizer.step()`` has read this step's learning rate.

``ReduceLROnPlateau.step(metrics)`` is the one schedule fed a number the replicas compute apart. One
device would see the metric of the whole global batch; the replicas' metrics are of their slices, so
the scheduler sees their mean over every replica (of every worker): exactly one device's value
when the metric is a mean over equal slices (a mean loss), and a number every replica and worker
agrees on otherwise (DDP programs all-reduce their metric for that reason). In cross-replica
context a ``PerReplica`` metric (``strategy.run``'s result) raises ``TypeError``: the right
reduction (MEAN of a mean loss, SUM of counts) is the program's to say, with ``strategy.reduce``.

torch has no hook for scheduler steps, so while a strategy lives (``live_hooks``) ``install`` wraps ``step`` of torch's scheduler classes
that define one (``LRScheduler`` and its overriding subclasses); a user's subclass that calls
``super().step()`` goes through the wrapper of the class it extends. Schedulers of optimizers over
no distributed variable, and one replica in all (one local replica for the schedules fed no
metric), run as torch wrote them.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from torch.optim import lr_scheduler

from multidev.distribute import once_per_step
from multidev.values.distributed import PerReplica


def _holds_distributed_variables(optimizer: Any) -> bool:
    from multidev.distribute import optimizer_hooks   # optimizer_hooks imports this module's installer
    return optimizer is not None and optimizer_hooks._plan_for(optimizer) is not None


def _refuse_per_replica_metric(scheduler: Any, args: tuple, kwargs: dict) -> None:
    metric = args[0] if args else kwargs.get("metrics")
    if isinstance(metric, PerReplica):
        raise TypeError(
            f"{type(scheduler).__name__}.step(metrics={metric!r}) got one value per replica in cross-replica "
            "context. Reduce it first, as one device would have computed it: "
            "scheduler.step(strategy.reduce('MEAN', metric, axis=None)) for a mean loss or accuracy "
            "('SUM' for counts), or call scheduler.step(metric) inside strategy.run, where the replicas' "
            "metrics are averaged.")


def _mean_metric(strategy: Any, every: list) -> tuple[tuple, dict]:
    """Replica 0's arguments with the metric replaced by the mean of every replica's."""
    (args, kwargs), metrics = every[0], [a[0] if a else k["metrics"] for a, k in every]
    mean = once_per_step.mean_over_replicas(strategy, metrics)
    return ((mean,) + tuple(args[1:]), kwargs) if args else (args, dict(kwargs, metrics=mean))


def _once_per_step(step: Callable, averages_metric: bool) -> Callable:
    @functools.wraps(step)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The plateau's metric is averaged over every worker's replicas, even with one replica each.
        env = once_per_step.several_replicas() if averages_metric else once_per_step.several_local_replicas()
        if env is None:
            if averages_metric:
                _refuse_per_replica_metric(self, args, kwargs)
            return step(self, *args, **kwargs)
        if not _holds_distributed_variables(getattr(self, "optimizer", None)):
            return step(self, *args, **kwargs)

        def run(every: list) -> Any:
            first_args, first_kwargs = _mean_metric(env.strategy, every) if averages_metric else every[0]
            return step(self, *first_args, **first_kwargs)

        return once_per_step.once(env, ("lr_scheduler.step", type(self).__name__), (args, kwargs), run)

    wrapper._multidev_once_per_step = True
    return wrapper


def install() -> Callable[[], None]:
    """Wrap ``step`` of torch's scheduler classes; returns how to put torch's back
    (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    originals: dict[type, Callable] = {}
    for cls in vars(lr_scheduler).values():
        if inspect.isclass(cls) and cls is not lr_scheduler.Optimizer and "step" in cls.__dict__ \
                and (issubclass(cls, lr_scheduler.LRScheduler) or cls.__name__ == "ReduceLROnPlateau"):
            original = cls.__dict__["step"]
            if not getattr(original, "_multidev_once_per_step", False):
                cls.step = _once_per_step(original, averages_metric=cls is lr_scheduler.ReduceLROnPlateau)
                originals[cls] = original

    def remove() -> None:
        for cls, original in originals.items():
            cls.step = original

    return remove
