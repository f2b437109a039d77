"""What ``md.Variable`` accepts, checked as ``tf.Variable`` checks it: the ``dtype`` and ``shape``
arguments, and Python values that TensorFlow refuses to convert to the variable's dtype.

Separate from ``base_variable.py`` so that the variable's conversion path reads as one line per
rule, and the rules (each with TensorFlow's exception type and words) can be read together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from multidev.tensor_shape import TensorShape

# TensorFlow's names for dtypes in its conversion errors ("... to EagerTensor of dtype float").
_TF_NAMES = {torch.float32: "float", torch.float64: "double", torch.float16: "half", torch.bool: "bool"}
_NAMED = {"bfloat16": torch.bfloat16, "half": torch.float16, "float": torch.float32, "double": torch.float64}


def tf_dtype_name(dtype: torch.dtype) -> str:
    """TensorFlow's name of ``dtype`` in its messages (``float`` for float32, ``int32``...)."""
    return _TF_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def variable_dtype(dtype: Any) -> torch.dtype | None:
    """``dtype`` as a torch dtype: a torch dtype (``md.float32``), a name (``'float64'``) or a numpy
    type, as ``tf.Variable(dtype=...)`` takes them; anything else is TF's TypeError."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _NAMED:
        return _NAMED[dtype]
    try:
        np_dtype = np.dtype(dtype)
        if np_dtype.kind not in "biufc":
            raise TypeError(np_dtype)
        return torch.from_numpy(np.empty(0, np_dtype)).dtype
    except (TypeError, ValueError):
        raise TypeError(
            f"Cannot convert the argument `type_value`: {dtype!r} to a TensorFlow DType. Pass a dtype such as "
            "md.float32 or a name such as 'float32', 'int64' or 'bool'.") from None


def check_python_value(value: Any, array: np.ndarray, dtype: torch.dtype | None) -> np.ndarray:
    """``array`` (``np.asarray(value)``) if TensorFlow converts ``value`` to ``dtype``; else its TypeError.

    Python floats do not become integers, nor complex numbers floats (``Cannot convert [1.5] to
    EagerTensor of dtype int32``): a silent truncation would lose the program's numbers. Strings are
    refused, except numeric strings in a numpy array, which TensorFlow parses."""
    if array.dtype.kind in "US":
        if isinstance(value, np.ndarray) and dtype is not None:
            try:
                return array.astype(np.float64)
            except ValueError:
                pass
        target = "a number" if dtype is None else f"EagerTensor of dtype {tf_dtype_name(dtype)}"
        raise TypeError(f"Cannot convert {value!r} to {target}: md.Variable holds numbers only (torch has no "
                        "string tensors). Convert the strings first, e.g. with float() or a StringLookup layer.")
    if dtype is None or isinstance(value, (np.ndarray, np.generic)):
        return array   # numpy values are cast, as TensorFlow casts them
    lossy = (array.dtype.kind == "f" and not (dtype.is_floating_point or dtype.is_complex)) or \
        (array.dtype.kind == "c" and not dtype.is_complex)
    if lossy:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_dtype_name(dtype)}. Pass values "
                        f"of the variable's dtype, or cast explicitly (e.g. np.asarray(value).astype(...)).")
    return array


def check_shape_argument(shape: Any, value: Any) -> Any:
    """``value`` (a new variable or its initial tensor) if its shape is compatible with ``shape``
    (``tf.Variable(..., shape=...)``: None dimensions match any size; ``TensorShape(None)`` any shape)."""
    if shape is None:
        return value
    try:
        wanted = TensorShape(shape)
    except TypeError as exc:
        raise TypeError(f"Failed to convert {shape!r} to a shape: {exc} A shape should either be a single "
                        "dimension (e.g. 10), or an iterable of dimensions (e.g. [1, 10, None]).") from None
    actual = tuple(value.shape)
    dims = wanted.dims
    if dims is None or (len(dims) == len(actual) and all(d is None or d == a for d, a in zip(dims, actual))):
        return value
    raise ValueError(f"In this `md.Variable` creation, the initial value's shape ({actual}) is not compatible with "
                     f"the explicitly supplied `shape` argument ({tuple(dims)}).")
