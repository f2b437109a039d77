"""Keras 3's mean losses inside a custom loop's ``strategy.run``: divided by the replica count, as Keras 3 on
TensorFlow's strategies divides them (``keras.src.losses.loss.scale_loss_for_distribution``, a no-op on
the torch backend), so the replicas' summed gradients are the global mean's.

A TensorFlow user's custom loop (keras.io's ``writing_a_custom_training_loop_in_torch`` distributed with
``strategy.run``) calls ``loss_fn(targets, logits)`` with Keras's default ``sum_over_batch_size`` and hands
the gradients to ``optimizer.apply``, which sums them across replicas: unscaled, that trained with N times one
device's gradient. Checked with tensorflow 2.21 and Keras 3.15.1: a ``CategoricalCrossentropy`` called in
``strategy.run`` on 2 replicas returns half the replica's mean. ``md.keras`` does the same
(``md.keras.losses._scaled_for_distribution``).

Not scaled where multidev runs Keras's steps itself: ``fit``/``evaluate`` (``keras3_fit`` weights each
replica's loss by its share of the global batch, and its loss tracker reads the unscaled mean) and a
model's own ``train_step``/``test_step`` (``keras3_custom_step``: the optimizer weighs the gradients).
A scaled loss tells ``loss.backward()`` to sum, not average (a ``torch.optim`` optimizer then sees the
global mean's gradient too).

Those steps weigh a replica's loss by its share of the global batch, which makes a mean the global mean
but a ``reduction="sum"`` loss a fraction of the global sum: there Keras's ``reduce_values`` returns the
replica's sum divided by its share (``reduce_for_replicas``), so the weighted replicas add up to one
device's sum (loss, gradients and logged loss). ``mean_with_sample_weight`` and masked means divide by the
replica's own weights or unmasked count, as on TensorFlow's strategies (docs/keras3_parity.md).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

from multidev.integrations import keras3_custom_step
from multidev.values import context

#: Whether the calling replica runs multidev's ``fit``/``evaluate`` step (read by ``keras3._apply``, a bare get).
IN_KERAS_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar("multidev_keras3_in_step", default=False)
_SHARE: contextvars.ContextVar[float | None] = contextvars.ContextVar("multidev_keras3_share", default=None)


@contextlib.contextmanager
def keras_step() -> Iterator[None]:
    """Around a replica's part of multidev's ``fit``/``evaluate`` step: its losses stay Keras's own means."""
    token = IN_KERAS_STEP.set(True)
    try:
        yield
    finally:
        IN_KERAS_STEP.reset(token)


@contextlib.contextmanager
def batch_share(share: float) -> Iterator[None]:
    """Around a replica's loss in multidev's ``fit``/``evaluate`` step: the share of the global batch it is
    weighted by."""
    token = _SHARE.set(share)
    try:
        yield
    finally:
        _SHARE.reset(token)


def _replica_share() -> float | None:
    share = _SHARE.get()
    return keras3_custom_step.share() if share is None else share


def reduce_for_replicas(original: Any, values: Any, sample_weight: Any = None,
                        reduction: Any = "sum_over_batch_size") -> Any:
    """Keras's ``reduce_values``: a sum over a replica's slice divided by the share its step weighs it by."""
    loss = original(values, sample_weight, reduction)
    if reduction != "sum" or tuple(values.shape) in ((), (0,)):
        return loss
    share = _replica_share()
    return loss if share is None or share == 1 else loss * (1.0 / share)


def weighted_mean_update(original: Any, metric: Any, values: Any, sample_weight: Any = None) -> Any:
    """``Mean``/``Sum.update_state``: a scalar update without weights inside a custom step, or in a
    ``compute_loss`` that Keras's step calls, weighs the replica's share of the global batch."""
    share = _replica_share()
    if share is not None and sample_weight is None and getattr(values, "ndim", 0) == 0:
        sample_weight = share
    return original(metric, values, sample_weight=sample_weight)


def scale_for_replicas(original: Any, value: Any) -> Any:
    """Keras's ``scale_loss_for_distribution``: 1/replicas in a custom loop's replica function."""
    env = context.replica_env()
    if env is None or IN_KERAS_STEP.get() or keras3_custom_step.share() is not None:
        return original(value)
    replicas = env.replica_context.num_replicas_in_sync
    if replicas <= 1:
        return original(value)
    context.mark_loss_scaled()
    return value * (1.0 / replicas)


def install(loss_module: Any) -> None:
    """Replace ``loss_module.scale_loss_for_distribution`` and ``reduce_values`` (``reduce_values`` and
    ``reduce_weighted_values`` read the module's globals)."""
    original = loss_module.scale_loss_for_distribution
    original_reduce = loss_module.reduce_values

    def reduce_values(values, sample_weight=None, reduction="sum_over_batch_size"):
        return reduce_for_replicas(original_reduce, values, sample_weight, reduction)

    reduce_values.__doc__ = original_reduce.__doc__
    loss_module.reduce_values = reduce_values

    def scale_loss_for_distribution(value):
        return scale_for_replicas(original, value)

    scale_loss_for_distribution.__doc__ = original.__doc__
    loss_module.scale_loss_for_distribution = scale_loss_for_distribution
