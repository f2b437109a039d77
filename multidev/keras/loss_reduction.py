"""Keras 3's loss reductions: the reduction names, sample-weight shaping and the weighted reduce.

``md.keras.losses`` re-exports these (``Reduction``, ``reduce_weighted``); a Loss's ``__call__`` and the
compiled loss (``models/compile_utils``) reduce through them.

Example:
    reduce_weighted(per_sample, sample_weight, "sum_over_batch_size")
"""

from __future__ import annotations

import torch

from multidev._core.errors import InvalidArgumentError


def _as_tensor(x, like=None):
    if isinstance(x, torch.Tensor):
        return x
    t = torch.as_tensor(x)
    return t.to(like.device) if like is not None else t


class Reduction:
    """Names of the loss reductions Keras 3 accepts (``None`` = 'none'); Keras 2's 'auto' is refused."""

    AUTO = "auto"
    NONE = "none"
    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    MEAN = "mean"
    MEAN_WITH_SAMPLE_WEIGHT = "mean_with_sample_weight"
    _ALL = (SUM_OVER_BATCH_SIZE, SUM, NONE, None, MEAN, MEAN_WITH_SAMPLE_WEIGHT)

    @classmethod
    def validate(cls, reduction):
        if reduction not in cls._ALL:
            hint = (" 'auto' was Keras 2's default; Keras 3 (TensorFlow 2.21's tf.keras) removed it: use "
                    "'sum_over_batch_size'." if reduction == cls.AUTO else "")
            raise ValueError(f"Invalid Reduction Key: {reduction!r}. Expected keys are {list(cls._ALL)} "
                             f"(Keras 3's).{hint}")


def _same_rank(values, weights):
    """Keras's rule: when ranks differ by one and the longer ends in 1, squeeze it (or expand a rank-1
    other side); any other mismatch is left to broadcasting."""
    if weights.ndim == values.ndim + 1 and weights.shape[-1] == 1:
        return (values.unsqueeze(-1), weights) if values.ndim == 1 else (values, weights.squeeze(-1))
    if values.ndim == weights.ndim + 1 and values.shape[-1] == 1:
        return (values, weights.unsqueeze(-1)) if weights.ndim == 1 else (values.squeeze(-1), weights)
    return values, weights


def _weights_with_mask(sample_weight, mask, losses, reduction):
    """A Keras mask on the losses (``ignore_class``) folded into the weights: with a mean reduction a
    kept entry weighs ``total / kept``, so the mean is over the kept entries, as in Keras 3."""
    if mask is None:
        return sample_weight
    mask = mask.to(losses.dtype)
    if reduction in ("mean", "sum_over_batch_size"):
        kept = mask.sum()
        mask = mask * torch.where(kept > 0, mask.numel() / kept, torch.zeros_like(kept))
    if sample_weight is None:
        return mask
    return _multiply(*_same_rank(mask, sample_weight))


def _multiply(losses, weights):
    """losses * weights, a shape mismatch raising TensorFlow's InvalidArgumentError with a hint."""
    try:
        return losses * weights
    except RuntimeError as e:
        raise InvalidArgumentError(
            f"Incompatible shapes: losses {list(losses.shape)} and sample_weight {list(weights.shape)}: a "
            "sample_weight must match the losses' shape or broadcast to it (for a sequence output, give "
            "one weight per timestep, shape (batch, timesteps)).") from e


def reduce_weighted(losses, sample_weight=None, reduction="sum_over_batch_size", mask=None):
    """Weight per-sample ``losses`` and reduce them as Keras 3 does: a weight of one rank more or less
    ending in 1 is squeezed or expanded, anything else must broadcast (else InvalidArgumentError, as
    TensorFlow's); 'mean_with_sample_weight' divides by the weights' sum, the means by the count."""
    if mask is None:
        mask = getattr(losses, "_keras_mask", None)
    sw = sample_weight if sample_weight is None else _as_tensor(sample_weight, losses).to(losses.dtype)
    sw = _weights_with_mask(sw, mask, losses, reduction)
    if sw is not None:
        losses, sw = _same_rank(losses, sw)
        losses = _multiply(losses, sw)
    if reduction in (None, "none") or losses.ndim == 0 or tuple(losses.shape) == (0,):
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    divisor = sw.sum() if reduction == "mean_with_sample_weight" and sw is not None else losses.numel()
    divisor = torch.as_tensor(divisor, dtype=total.dtype, device=total.device)
    return torch.where(divisor != 0, total / divisor, torch.zeros_like(total))   # Keras's divide_no_nan
