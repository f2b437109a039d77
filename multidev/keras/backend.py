"""Keras backend helpers: unique layer names, floatx, epsilon, clear_session.

Example:
    md.keras.backend.clear_session()   # next Dense is named "dense" again
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
import re
import threading

import torch

_lock = threading.Lock()
_name_counts: dict[str, int] = {}
_EPSILON = 1e-7
_FLOATX = "float32"


def to_snake_case(name: str) -> str:
    """Class name -> Keras layer-name prefix (``MaxPooling1D`` -> ``max_pooling1d``)."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s[1:] if s.startswith("_") else s


def unique_name(prefix: str) -> str:
    """Return ``prefix`` the first time, then ``prefix_1``, ``prefix_2``, ... (Keras naming)."""
    with _lock:
        n = _name_counts.get(prefix, 0)
        _name_counts[prefix] = n + 1
    return prefix if n == 0 else f"{prefix}_{n}"


def clear_session() -> None:
    """Reset the automatic layer/model name counters (as ``tf.keras.backend.clear_session``)."""
    with _lock:
        _name_counts.clear()


def epsilon() -> float:
    """The fuzz factor Keras uses to avoid log(0) and division by zero (1e-7)."""
    return _EPSILON


def floatx() -> str:
    """Default float type name of weights and inputs ('float32')."""
    return _FLOATX


_DTYPES = {
    "float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64, "double": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "bool": torch.bool,
}


def as_dtype(dtype) -> torch.dtype:
    """Turn a Keras/numpy dtype name (or torch dtype) into a ``torch.dtype``."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    key = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    if key not in _DTYPES:
        raise ValueError(f"Unknown dtype {dtype!r}. Valid names: {sorted(_DTYPES)}.")
    return _DTYPES[key]


def get_value(x):
    """Python/numpy value of a tensor, float or optimizer hyper-parameter."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return x


def set_value(obj, value):
    """In-place assignment to a tensor or variable (as ``K.set_value``).

    A multidev variable is written through ``assign``, so under a strategy every replica's copy
    gets the value (``copy_`` on a sync-on-read variable would write a reduced temporary, and on a
    mirrored one only the primary)."""
    from multidev.values.variables import Variable

    if isinstance(obj, Variable):
        obj.assign(value)
        return
    with torch.no_grad():
        obj.copy_(torch.as_tensor(value, dtype=obj.dtype))

__getattr__ = missing_names(__name__, 'backend', globals())  # unknown names: does Keras 3 have them?
