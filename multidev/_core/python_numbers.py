"""TensorFlow's dtypes for Python numbers: float32 for floats and int32 for ints (int64 past int32's range),
where numpy (and so torch) gives float64 and int64. One rule for ``md.constant`` and the ops that convert
their arguments (``ops.py``) and for ``md.Variable`` (``values/base_variable.py``); numpy values keep
their dtype, as in TensorFlow."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch


def is_python_numbers(value: Any) -> bool:
    """Python numbers or (nested) lists/tuples of them (not numpy scalars or arrays)."""
    if isinstance(value, (list, tuple)):
        return all(is_python_numbers(v) for v in value)
    return isinstance(value, numbers.Number) and not isinstance(value, np.generic)


def with_tf_dtype(value: Any, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (``torch.as_tensor(np.asarray(value))``) in TensorFlow's dtype when ``value`` is Python numbers."""
    if not is_python_numbers(value):
        return tensor
    if tensor.dtype == torch.float64:
        return tensor.to(torch.float32)
    if tensor.dtype == torch.int64 and (tensor.numel() == 0 or bool(tensor.abs().max() < 2**31)):
        return tensor.to(torch.int32)
    return tensor
