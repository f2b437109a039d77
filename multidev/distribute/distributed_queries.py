"""``torch.distributed.is_initialized()`` asked by the program inside ``strategy.run`` on several replicas.

Detection and segmentation programs normalise their loss by a count summed over the ranks through a helper
that all-reduces only when a process group exists: FCOS's ``reduce_sum(num_pos) / num_gpus``, DETR's
``if is_dist_avail_and_initialized(): all_reduce(num_boxes)``, rosinality's ``dist_fn.all_reduce``;
torchvision's ``utils.reduce_dict`` averages the logged losses the same way. multidev starts no process
group, so the helper would skip its all-reduce and each replica would divide by its own count: weights
silently apart from DDP's (whose ranks divide by the global count). So, while a strategy of more than one
replica in sync runs a step and no process group exists, the program's question is refused, naming the
replica context's ``all_reduce``. torch's own callers (SyncBatchNorm, the profiler, torch.compile),
multidev's, transformers' ``generate``, torchmetrics' metrics and Lightning's and Accelerate's utilities
(``_COORDINATING``) get torch's answer, as does every caller
outside ``strategy.run`` (timm's ``args.distributed``).
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch.distributed as dist

from multidev.values import context

_FIX = (
    "torch.distributed.is_initialized() inside strategy.run: {strategy}'s {n} replicas are not torch.distributed "
    "ranks and multidev starts no process group, so a helper that all-reduces only where one exists (FCOS's "
    "reduce_sum(num_pos), DETR's all_reduce(num_boxes), torchvision's utils.reduce_dict, a get_world_size() that "
    "returns 1) would skip its all-reduce: each replica would normalise its loss by its own count, not DDP's "
    "global one, and train silently apart from DDP. Inside the step write ctx = md.distribute.get_replica_context(); "
    "num_pos = ctx.all_reduce('sum', num_pos) (a mean over the ranks: / ctx.num_replicas_in_sync, DDP's "
    "world_size). For logged values (reduce_dict) return them from the step and call strategy.reduce('mean', "
    "value, axis=None) after strategy.run. See docs/ddp_port.md, 'Detection and segmentation'.")


#: Callers whose question decides only how processes coordinate or when a metric syncs, never a loss
#: (transformers' ``generate`` asks for ``synced_gpus``; torchmetrics' ``Metric.forward`` asks at every batch,
#: and syncs only in ``compute``, after the runs, as under DDP; Lightning's and Accelerate's own utilities):
#: they get torch's answer.
_COORDINATING = ("transformers.generation", "transformers.pipelines", "torchmetrics", "lightning",
                 "pytorch_lightning", "lightning_fabric", "lightning_utilities", "accelerate")


def _program_asks(frame: Any, depth: int = 6) -> bool:
    """Whether the caller is the program's code (its own or a model library's loss), not torch's or multidev's
    own, nor called from a ``_COORDINATING`` module within ``depth`` frames."""
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    if module.split(".", 1)[0] in ("torch", "multidev"):
        return False
    for _ in range(depth):
        if frame is None:
            return True
        if frame.f_globals.get("__name__", "").startswith(_COORDINATING):
            return False
        frame = frame.f_back
    return True


def _guarded(original: Callable[[], bool]) -> Callable[[], bool]:
    @functools.wraps(original)
    def is_initialized() -> bool:
        answer = original()
        env = context.replica_env()
        if answer or env is None or env.strategy.num_replicas_in_sync < 2 or not _program_asks(sys._getframe(1)):
            return answer
        raise ValueError(_FIX.format(strategy=type(env.strategy).__name__, n=env.strategy.num_replicas_in_sync))

    is_initialized._multidev_wrapped = True
    return is_initialized


def install() -> Callable[[], None]:
    """Wrap ``torch.distributed.is_initialized``; returns how to put torch's back."""
    if not dist.is_available() or getattr(dist.is_initialized, "_multidev_wrapped", False):
        return lambda: None
    original = dist.is_initialized
    dist.is_initialized = _guarded(original)
    return lambda: setattr(dist, "is_initialized", original)
