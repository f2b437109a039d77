"""Keras 3's ``BatchNormalization(synchronized=True)`` on multidev's strategies: the global batch's moments.

Keras 3 on torch refuses ``synchronized=True`` (``ValueError`` in ``__init__``; its torch ``ops.moments``
raises ``NotImplementedError``): torch has no strategy to synchronize over. On multidev it has one, so
the layer is accepted and, in training inside ``strategy.run``, normalizes with the moments of the global
batch: every replica's sums (of the inputs, their squares, and the example count) are summed through the
differentiable replica all-reduce (forward and backward), which equals Keras 3's one-device BatchNorm
over the global batch; every replica updates its moving statistics with the global moments. Outside
``strategy.run`` (one device, ``predict``'s symbolic build) the moments are the local batch's, as Keras's.
A plain ``BatchNormalization`` keeps normalizing each replica's slice (TensorFlow's MirroredStrategy
semantics without ``synchronized``; docs/keras3_parity.md).

Private Keras names used: ``BatchNormalization._moments``, ``_reduction_axes`` and
``Layer._flatten_layers`` (checked against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch

from multidev._core.enums import ReduceOp
from multidev.values import context


def init(original: Any, layer: Any, *args: Any, **kwargs: Any) -> None:
    """``BatchNormalization.__init__``: accept ``synchronized=True`` (Keras on torch raises for it)."""
    synchronized = bool(kwargs.pop("synchronized", False))
    original(layer, *args, **kwargs)
    layer.synchronized = synchronized


def moments(original: Any, layer: Any, inputs: Any, mask: Any) -> Any:
    """``BatchNormalization._moments``: the global batch's mean and variance when synchronized inside
    ``strategy.run``; Keras's own (local) moments otherwise."""
    ctx = context.current_replica_context()
    if not layer.synchronized or ctx is None or ctx.num_replicas_in_sync == 1:
        synchronized, layer.synchronized = layer.synchronized, False   # (Keras's torch moments refuse True)
        try:
            return original(layer, inputs, mask)
        finally:
            layer.synchronized = synchronized
    axes = tuple(layer._reduction_axes)
    if mask is None:
        return _global_moments(ctx, inputs, axes)
    return _global_masked_moments(ctx, inputs, mask, axes)


def _global_moments(ctx: Any, x: torch.Tensor, axes: tuple) -> tuple:
    """Keras's one-pass moments (``E[x^2] - E[x]^2``, float16 in float32) over every replica's examples."""
    dtype = x.dtype
    if dtype == torch.float16:
        x = x.float()
    count = x.new_tensor(float(math.prod(x.shape[a] for a in axes)))
    total, total_sq, count = ctx.all_reduce(ReduceOp.SUM, (x.sum(axes), (x * x).sum(axes), count))
    mean = total / count
    variance = total_sq / count - mean * mean
    if dtype == torch.float16:   # as Keras's torch moments: clip to float16's range, then cast back
        limit = torch.finfo(torch.float16).max
        mean, variance = mean.clamp(-limit, limit).to(dtype), variance.clamp(-limit, limit).to(dtype)
    return mean, variance


def _global_masked_moments(ctx: Any, x: torch.Tensor, mask: Any, axes: tuple) -> tuple:
    """Keras's masked moments (a weighted mean, then the weighted squared distance) over every replica's
    unmasked examples."""
    keep = torch.as_tensor(mask, device=x.device).bool().unsqueeze(-1).expand(x.shape)
    weights = keep.to(x.dtype)
    total, weight = ctx.all_reduce(ReduceOp.SUM, ((x * weights).sum(axes, keepdim=True),
                                                  weights.sum(axes, keepdim=True)))
    epsilon = sys.modules["keras"].backend.epsilon()   # as Keras's masked _moments adds it
    mean = total / (weight + epsilon)
    distance = ctx.all_reduce(ReduceOp.SUM, (torch.where(keep, x - mean, 0) ** 2).sum(axes, keepdim=True))
    return mean.squeeze(), (distance / (weight + epsilon)).squeeze()


def _synchronized_in(model: Any) -> bool:
    batch_norm = sys.modules["keras"].layers.BatchNormalization
    return any(isinstance(layer, batch_norm) and layer.synchronized for layer in model._flatten_layers())


def refuse_uneven_custom_step(model: Any, sizes: list) -> None:
    """Before a model's own ``train_step`` on unequal slices: refuse a synchronized ``BatchNormalization``.
    Each replica's ``loss.backward()`` sends its gradient through the moments' all-reduce to every replica's
    inputs unweighted, and ``optimizer.apply`` then weights each replica's whole gradient by its own share
    (``keras3_custom_step``): exact when the shares are equal, not otherwise."""
    if _synchronized_in(model):
        raise ValueError(
            f"{type(model).__name__} overrides train_step and has a BatchNormalization(synchronized=True); the "
            f"replicas got unequal slices {sizes} of the global batch, where its gradient through the synchronized "
            "moments would not be the global batch's. Choose a batch_size divisible by the number of replicas "
            f"({len(sizes)}) and drop the remainder (or a dataset size that is a multiple of it), or use Keras's "
            "built-in train_step (exact on any split)."
        )


def refuse_empty_slice(model: Any, global_size: int, sizes: list) -> None:
    """Before a step whose global batch leaves a replica without examples: refuse a model holding a
    synchronized ``BatchNormalization`` (the replica with no examples runs no forward pass, so the others'
    moment all-reduce would wait for it)."""
    if _synchronized_in(model):
        raise ValueError(
            f"{type(model).__name__} has a BatchNormalization(synchronized=True) and got a global batch of "
            f"{global_size} example(s) on {len(sizes)} replicas, cut as TensorFlow cuts it ({sizes}): every replica "
            "needs at least one example to join the batch moments. Choose a batch_size every replica gets rows "
            "of (slices of ceil(batch / replicas) rows), or drop the remainder."
        )
