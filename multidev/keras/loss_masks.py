"""Keras masks in the compiled loss and metrics: masked timesteps count for nothing (Keras 3's ``apply_mask``).

A prediction carrying ``_keras_mask`` (``Embedding(mask_zero=True)`` -> ``LSTM(return_sequences=True)``
-> ``Dense``) weights each element's loss by the mask, and the loss is ``sum(loss * mask *
sample_weight) / valid`` with ``valid`` the number of unmasked elements. On a strategy ``valid`` is
summed over the replicas, so N replicas give one device's loss (TF's MirroredStrategy divides by
each replica's own count: its 2-replica loss is not its one-device loss).
"""

from __future__ import annotations

import torch

from multidev.keras import step_inputs
from multidev.values.context import current_replica_context


def mask_of(y_pred):
    """The Keras mask riding on a prediction, or None."""
    return getattr(y_pred, "_keras_mask", None)


def _to_rank(weight: torch.Tensor, per: torch.Tensor) -> torch.Tensor:
    """Squeeze or expand trailing axes of 1 so ``weight`` broadcasts to ``per`` (Keras's rule)."""
    while weight.dim() > per.dim() and weight.shape[-1] == 1:
        weight = weight.squeeze(-1)
    while weight.dim() < per.dim():
        weight = weight.unsqueeze(-1)
    return weight


def global_valid(mask: torch.Tensor) -> torch.Tensor:
    """The number of unmasked elements of the step's global batch (summed over replicas in a fit step)."""
    valid = mask.to(torch.float32).sum()
    ctx = current_replica_context()
    if step_inputs.current() is not None and ctx is not None and ctx.num_replicas_in_sync > 1:
        valid = ctx.all_reduce("SUM", valid)
    return valid


def masked_loss(per: torch.Tensor, mask: torch.Tensor, sample_weight) -> torch.Tensor:
    """``sum(per * mask * sample_weight) / valid`` (0 when nothing is valid, as ``divide_no_nan``)."""
    weight = _to_rank(mask.to(per.dtype), per)
    if sample_weight is not None:
        sw = torch.as_tensor(sample_weight, dtype=per.dtype, device=per.device)
        weight = weight * _to_rank(sw, weight)
    valid = global_valid(mask).to(per.dtype)
    total = (per * weight).sum()
    return torch.where(valid > 0, total / valid.clamp_min(1e-30), torch.zeros_like(total))


def metric_weight(mask, values: torch.Tensor, sample_weight):
    """A metric's sample weight with the mask folded in (Keras 3: reduction 'sum', no renormalising)."""
    if mask is None:
        return sample_weight
    weight = _to_rank(mask.to(values.dtype), values)
    if sample_weight is not None:
        weight = weight * _to_rank(torch.as_tensor(sample_weight, dtype=values.dtype, device=values.device), weight)
    return weight
