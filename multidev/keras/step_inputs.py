"""The per-call inputs of one Keras step on a strategy: the seam between Keras and the replicas.

``fit``/``evaluate``/``predict`` on a strategy hand one immutable :class:`StepInputs` to every
replica of a step (``extended.call_for_each_replica(..., step=inputs)``, read back as
``replica_env().step``). Losses divide by its ``global_batch_size`` and metrics keep their state in
its ``metric_states[replica_id]``, so no loss or metric object is changed to run a step.

Example:
    inputs = StepInputs("train", global_batch_size=64, metric_states=({}, {}))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from multidev.values.context import replica_env

STEP_KINDS = ("train", "test", "predict")


@dataclass(frozen=True, slots=True)
class StepInputs:
    """What every replica of one step needs from the caller.

    Attributes:
        kind: 'train', 'test' or 'predict'.
        global_batch_size: examples in the step across all replicas and workers: the divisor of each
            replica's summed loss (so summed gradients equal one device's). None: the replica's batch.
        metric_states: one dict per local replica (metric -> {state name: tensor}) where that
            replica's metrics accumulate, merged exactly after the step; empty: metrics use their own.
        zipped: the batch is a ``Dataset.zip`` of parts batched to different sizes, each cut on its own:
            a loss's global batch is then the replicas' rows of what it was given, summed (``global_batch``).
    """

    kind: str
    global_batch_size: int | None = None
    metric_states: tuple[dict, ...] = ()
    zipped: bool = False

    def __post_init__(self) -> None:
        check_kind(self.kind)


def check_kind(kind: str) -> str:
    """``kind`` if it is a step kind, else ValueError naming the valid ones."""
    if kind not in STEP_KINDS:
        raise ValueError(f"Unknown step kind: {kind!r}; valid kinds: {list(STEP_KINDS)}.")
    return kind


def current() -> StepInputs | None:
    """The running replica's step inputs, or None outside a Keras step on a strategy."""
    env = replica_env()
    step = None if env is None else env.step
    return step if isinstance(step, StepInputs) else None


def metric_store() -> dict | None:
    """Where the running replica's metrics keep their state in this step, or None (their own state)."""
    env = replica_env()
    if env is None:
        return None
    step = env.step
    if isinstance(step, StepInputs) and step.metric_states:
        return step.metric_states[env.replica_id]
    return None


def replica_share(batch: int) -> float | None:
    """This replica's share of the step's global batch (``batch / global_batch_size``) in a Keras
    step on a strategy, else None. A loss divided by the global batch is that share of the
    global mean (see :func:`mark_share`)."""
    total = global_batch(batch)
    return batch / total if total else None


def global_batch(batch: int) -> int | None:
    """The global batch a replica's loss over ``batch`` examples stands for in a Keras step on a strategy,
    else None: the step's ``global_batch_size``, or with a zip of parts batched to different sizes (16
    unlabeled and 4 labeled rows) the rows every replica passes this loss, summed (4 for a loss on the
    labeled part alone, cut 2 + 2), so each part's loss divides by its own global batch."""
    step = current()
    if step is None or not step.zipped:
        return step.global_batch_size if step is not None else None
    ctx = replica_env().replica_context
    return int(ctx.all_reduce("SUM", torch.tensor(int(batch), dtype=torch.int64)).item())


def mark_share(loss, batch: int) -> None:
    """Tag a replica's loss (summed over its ``batch`` examples, divided by the global batch) with
    its share, so a ``Mean`` tracker fed ``loss`` alone (a custom ``train_step``'s
    ``loss_tracker.update_state(loss)``) records the global batch's mean, as on one device."""
    share = replica_share(batch)
    if share is not None:
        loss._md_replica_share = share


def share_of(value) -> float | None:
    """The share :func:`mark_share` tagged ``value`` with, or None."""
    return getattr(value, "_md_replica_share", None)


__all__ = ["STEP_KINDS", "StepInputs", "check_kind", "current", "global_batch", "mark_share", "metric_store", "replica_share",
           "share_of"]
