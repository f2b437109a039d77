"""``lr_scheduler.step()`` inside ``strategy.run`` happens once per step, not once per replica.

Hugging Face's documented loop (and many others) call ``scheduler.step()`` right after
``optimizer.step()`` in the step function. The scheduler and the optimizer's ``param_groups`` are
one object shared by every local replica, so N replicas would advance the schedule N times a step.
Under DDP each process has its own scheduler and steps it once; here the replicas meet (as in
``merge_call``) and the last to arrive steps the scheduler once, in cross-replica context, with
replica 0's arguments (``ReduceLROnPlateau.step(metrics)`` sees replica 0's metric); every replica
gets its result. Meeting there also orders the schedule after every replica's ``optimizer.step()``
has read this step's learning rate.

torch has no hook for scheduler steps, so while a strategy lives (``live_hooks``) ``install`` wraps ``step`` of torch's scheduler classes
that define one (``LRScheduler`` and its overriding subclasses); a user's subclass that calls
``super().step()`` goes through the wrapper of the class it extends. Schedulers of optimizers over
no distributed variable, and one local replica, run as torch wrote them.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from torch.optim import lr_scheduler

from multidev.values import context


def _holds_distributed_variables(optimizer: Any) -> bool:
    from multidev.distribute import optimizer_hooks   # optimizer_hooks imports this module's installer
    return optimizer is not None and optimizer_hooks._plan_for(optimizer) is not None


def _once_per_step(step: Callable) -> Callable:
    @functools.wraps(step)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        env = context.replica_env()
        if env is None or env.strategy.extended.num_local_replicas == 1 \
                or not _holds_distributed_variables(getattr(self, "optimizer", None)):
            return step(self, *args, **kwargs)
        strategy = env.strategy

        def once(payloads: list) -> list:
            first_args, first_kwargs = payloads[0]
            with context.cross_replica(strategy):
                result = step(self, *first_args, **first_kwargs)
            return [result] * len(payloads)

        return strategy.extended.replica_group.exchange(
            env.replica_id, ("lr_scheduler.step", type(self).__name__), (args, kwargs), once)

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
                cls.step = _once_per_step(original)
                originals[cls] = original

    def remove() -> None:
        for cls, original in originals.items():
            cls.step = original

    return remove
