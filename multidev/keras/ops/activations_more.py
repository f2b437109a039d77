"""More of ``keras.ops.nn``' activations on torch, with Keras 3's defaults (``hard_shrink``/``soft_shrink``
threshold 0.5, ``celu`` alpha 1, ``squareplus`` b 4, ``glu`` over the last axis).

Example:
    h = ops.glu(ops.matmul(x, w_gate_and_value))     # halves the last axis
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def log_sigmoid(x):
    """log(sigmoid(x)), computed stably."""
    return F.logsigmoid(_float(x))


def glu(x, axis=-1):
    """Gated linear unit: the first half of ``axis`` times the sigmoid of the second half."""
    x = _float(x)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: the size of axis {axis} must be even; received shape {tuple(x.shape)}.")
    return F.glu(x, dim=axis)


def hard_tanh(x):
    """x clipped to [-1, 1]."""
    return F.hardtanh(_float(x), -1.0, 1.0)


def hard_shrink(x, threshold=0.5):
    """x where |x| > threshold, else 0."""
    return F.hardshrink(_float(x), threshold)


def soft_shrink(x, threshold=0.5):
    """x moved ``threshold`` toward 0, and 0 within [-threshold, threshold]."""
    return F.softshrink(_float(x), threshold)


def tanh_shrink(x):
    """x - tanh(x)."""
    return F.tanhshrink(_float(x))


def celu(x, alpha=1.0):
    """Continuously differentiable ELU: max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))."""
    return F.celu(_float(x), alpha)


def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2, a smooth ReLU."""
    x = _float(x)
    return (x + torch.sqrt(x * x + b)) / 2


def threshold(x, threshold, default_value):  # noqa: A002 - Keras's argument name
    """x where x > threshold, else ``default_value``."""
    return F.threshold(_t(x), threshold, default_value)


def sparse_plus(x):
    """0 for x <= -1, (x + 1)**2 / 4 for -1 < x < 1, x for x >= 1."""
    x = _float(x)
    return torch.where(x <= -1, torch.zeros_like(x), torch.where(x < 1, (x + 1) ** 2 / 4, x))


def sparse_sigmoid(x):
    """0 for x <= -1, (x + 1) / 2 for -1 < x < 1, 1 for x >= 1."""
    return torch.clamp((_float(x) + 1) / 2, 0.0, 1.0)


def hard_silu(x):
    """x * relu6(x + 3) / 6."""
    return F.hardswish(_float(x))


hard_swish = hard_silu
