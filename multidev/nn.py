"""``md.nn``: loss scaling helpers for distributed training (``tf.nn.compute_average_loss`` etc.), ``softmax``
and the tutorials' ``sigmoid_cross_entropy_with_logits``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from multidev._core import errors as md_errors
from multidev._core.eager_tensor import readable_results
from multidev.ops import _to_tensor
from multidev.values import context


def _num_replicas() -> int:
    ctx = context.current_replica_context()
    if ctx is not None:
        return ctx.num_replicas_in_sync
    strategy = context.current_scope_strategy()
    return 1 if strategy is None else strategy.num_replicas_in_sync


def compute_average_loss(per_example_loss: Any, sample_weight: Any = None, global_batch_size: int | None = None) -> torch.Tensor:
    """Sum of per-example losses divided by the global batch size.

    Use it in a replica function so that summing gradients across replicas gives the gradient of
    the mean loss over the global batch. ``global_batch_size`` defaults to the per-replica batch
    size times the number of replicas; pass it explicitly when the last batch may be uneven.
    Inside ``strategy.run`` it also tells ``loss.backward()`` to sum this step's gradients across
    replicas (TensorFlow's rule) instead of averaging them (DDP's rule for torch's mean losses).

    Example:
        >>> loss = md.nn.compute_average_loss(per_example_loss, global_batch_size=64)
    """
    loss = per_example_loss if isinstance(per_example_loss, torch.Tensor) else torch.as_tensor(per_example_loss)
    if loss.dim() == 0:
        raise ValueError(
            f"Invalid value passed for `per_example_loss`: expected a tensor with at least rank 1 "
            f"(one loss per example), got a scalar {loss!r}. Compute the loss with reduction='none'."
        )
    if sample_weight is not None:
        weight = sample_weight if isinstance(sample_weight, torch.Tensor) else torch.as_tensor(sample_weight)
        loss = loss * weight.to(loss.dtype)
    if global_batch_size is None:
        global_batch_size = loss.shape[0] * _num_replicas()
    elif isinstance(global_batch_size, bool) or not isinstance(global_batch_size, (int, torch.Tensor)) or int(global_batch_size) < 0:
        raise ValueError(f"global_batch_size must be a non-negative integer, got {global_batch_size!r}.")
    total = loss.sum()
    context.mark_loss_scaled()   # scaled by the global batch: loss.backward() sums, doesn't average
    if int(global_batch_size) == 0:
        return total * 0.0  # TF's div_no_nan
    return total / int(global_batch_size)


def scale_regularization_loss(regularization_loss: Any) -> torch.Tensor:
    """Divide a (sum of) regularization loss(es) by the number of replicas in sync."""
    if isinstance(regularization_loss, (list, tuple)):
        if not regularization_loss:
            return torch.tensor(0.0)
        total = torch.stack([torch.as_tensor(r) for r in regularization_loss]).sum()
    else:
        total = torch.as_tensor(regularization_loss)
    return total / _num_replicas()


def _logits(logits: Any, axis: Any) -> tuple[torch.Tensor, int]:
    """``logits`` as a floating tensor (a numpy array as TensorFlow converts it) and the axis as an int."""
    x = _to_tensor(logits, None)
    if not x.is_floating_point():
        raise md_errors.InvalidArgumentError(
            f"Value for attr 'T' of {str(x.dtype).replace('torch.', '')} is not in the list of allowed values: "
            "half, bfloat16, float, double (softmax needs floating logits): cast first, e.g. "
            "md.cast(logits, md.float32).")
    if axis is None:
        return x, -1
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"`axis` must be an int (the axis to normalize along, -1 for the last), got {axis!r}.")
    rank = max(x.dim(), 1)
    if not -rank <= axis < rank:
        raise md_errors.InvalidArgumentError(
            f"`dim` must be in the range [-{rank}, {rank}) where {rank} is the number of dimensions in the "
            f"input. Received: dim={axis!r}")
    return x, int(axis)


def softmax(logits: Any, axis: int | None = None, name: str | None = None) -> torch.Tensor:
    """``tf.nn.softmax``: the beginner quickstart's ``tf.nn.softmax(predictions).numpy()`` (a numpy array
    or a tensor; ``axis`` defaults to the last, where ``torch.softmax`` needs ``dim``)."""
    x, axis = _logits(logits, axis)
    return torch.softmax(x, dim=axis)


def log_softmax(logits: Any, axis: int | None = None, name: str | None = None) -> torch.Tensor:
    """``tf.nn.log_softmax``: ``softmax``'s logarithm, computed stably (``torch.log_softmax``)."""
    x, axis = _logits(logits, axis)
    return torch.log_softmax(x, dim=axis)


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None, name: str | None = None) -> torch.Tensor:
    """``tf.nn.sigmoid_cross_entropy_with_logits``: the element-wise loss ``max(x, 0) - x * z + log(1 + exp(-|x|))``
    in TensorFlow's order of operations (the CVAE tutorial's reconstruction term), not reduced.

    Raises:
        ValueError: ``labels`` or ``logits`` missing, or shapes that differ (no broadcasting, as TF).
        InvalidArgumentError: integer logits, or labels of another dtype than the logits (TF's Mul/Exp kernels).

    Example:
        >>> md.nn.sigmoid_cross_entropy_with_logits(labels=[[1., 0.]], logits=[[1., -2.]]).numpy().round(4)
        array([[0.3133, 0.1269]], dtype=float32)
    """
    if labels is None or logits is None:
        raise ValueError("Both `labels` and `logits` must be provided for sigmoid_cross_entropy_with_logits. "
                         f"Received: labels={labels!r} and logits={logits!r}")
    x, z = _to_tensor(logits, None), _to_tensor(labels, None)
    if tuple(x.shape) != tuple(z.shape):
        raise ValueError(f"`logits` and `labels` must have the same shape, received ({tuple(x.shape)} vs "
                         f"{tuple(z.shape)}): the loss is element-wise and does not broadcast.")
    if not x.is_floating_point():
        raise md_errors.InvalidArgumentError(
            f"Value for attr 'T' of {str(x.dtype).replace('torch.', '')} is not in the list of allowed values: "
            "bfloat16, half, float, double (sigmoid_cross_entropy_with_logits needs floating logits): cast first, "
            "e.g. md.cast(logits, md.float32).")
    if z.dtype != x.dtype:
        raise md_errors.InvalidArgumentError(
            f"labels of dtype {str(z.dtype).replace('torch.', '')} with logits of dtype "
            f"{str(x.dtype).replace('torch.', '')}: TensorFlow does not convert them; cast the labels first, e.g. "
            f"md.cast(labels, logits.dtype).")
    zeros = torch.zeros_like(x)
    positive = x >= zeros
    relu_logits = torch.where(positive, x, zeros)
    neg_abs_logits = torch.where(positive, -x, x)
    return (relu_logits - x * z) + torch.log1p(torch.exp(neg_abs_logits))


# Results a TF program reads with .numpy() while they carry gradients (``loss.numpy()`` in a replica function).
compute_average_loss, scale_regularization_loss, softmax, log_softmax, sigmoid_cross_entropy_with_logits = (
    readable_results(op) for op in (compute_average_loss, scale_regularization_loss, softmax, log_softmax,
                                    sigmoid_cross_entropy_with_logits))

__all__ = ["compute_average_loss", "log_softmax", "scale_regularization_loss", "sigmoid_cross_entropy_with_logits",
           "softmax"]


def __getattr__(name: str):
    """``md.nn.relu`` and other tf.nn ops: an AttributeError naming the torch function to call."""
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.nn", name, f"tf.nn.{name}")
