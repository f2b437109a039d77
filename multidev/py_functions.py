"""``md.numpy_function`` and ``md.py_function``: TensorFlow's calls into Python from a data pipeline or function.

keras.io's 3D image classification augments its CT volumes in a ``Dataset.map`` with
``tf.numpy_function(scipy_rotate, [volume], tf.float32)``. multidev runs ``map`` functions and md.functions as
Python on torch tensors, so the call itself is direct; what these keep is TensorFlow 2.21's contract where they run
(a map or ``tf.function`` graph): ``numpy_function`` hands ``func`` numpy arrays and its results must have
``Tout``'s dtypes (a float64 result for ``Tout=tf.float32`` is an ``InvalidArgumentError`` there, not a cast);
``py_function`` hands ``func`` tensors and converts its results to ``Tout`` (a Python number takes the dtype, a
tensor of another dtype is refused). ``Tout`` a dtype: one tensor; a list or tuple of dtypes: a list.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from multidev._core.errors import InvalidArgumentError
from multidev.ops import _as_dtype


def numpy_function(func: Callable, inp: list, Tout: Any, stateful: bool = True, name: str | None = None) -> Any:
    """``func(*arrays)`` of ``inp`` read as numpy arrays; its results as tensors of ``Tout``'s dtypes.

    Example:
        >>> md.numpy_function(lambda v: v * 2, [md.constant([1.0])], md.float32)
    """
    arrays = [_as_numpy(v) for v in inp]
    return _results(func(*arrays), Tout, "numpy_function", _from_numpy)


def py_function(func: Callable, inp: list, Tout: Any, name: str | None = None) -> Any:
    """``func(*tensors)`` of ``inp``; its results converted to ``Tout``'s dtypes."""
    tensors = [v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v)) for v in inp]
    return _results(func(*tensors), Tout, "py_function", _converted)


def _dtype_of(tout: Any) -> torch.dtype:
    if tout is None:
        raise TypeError("Tout is None: name the dtype (md.float32) or a list of dtypes, one per returned value.")
    return _as_dtype(tout)


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _results(values: Any, Tout: Any, what: str, make: Callable) -> Any:
    """One tensor for a dtype ``Tout``; a list for a list or tuple of dtypes (a lone value fits one dtype)."""
    if not isinstance(Tout, (list, tuple)):
        return make(values, _dtype_of(Tout), 0, what)
    dtypes = [_dtype_of(t) for t in Tout]
    if len(dtypes) == 1 and not isinstance(values, (list, tuple)):
        values = [values]
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if len(values) != len(dtypes):
        raise InvalidArgumentError(f"The function of {what} returned {len(values)} values, but Tout has "
                                   f"{len(dtypes)} dtypes ({list(Tout)!r}): return one value per dtype of Tout.")
    return [make(v, d, i, what) for i, (v, d) in enumerate(zip(values, dtypes))]


def _from_numpy(value: Any, dtype: torch.dtype, index: int, what: str) -> torch.Tensor:
    array = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
    got = torch.from_numpy(np.zeros((), array.dtype)).dtype if array.dtype != object else None
    if got != dtype:
        _refuse(array.dtype, dtype, index, what)
    return torch.from_numpy(np.array(array, copy=True))


def _converted(value: Any, dtype: torch.dtype, index: int, what: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.dtype != dtype:
            _refuse(str(value.dtype).replace("torch.", ""), dtype, index, what)
        return value
    return torch.as_tensor(np.asarray(value)).to(dtype)


def _refuse(got: Any, dtype: torch.dtype, index: int, what: str):
    want = str(dtype).replace("torch.", "")
    raise InvalidArgumentError(
        f"The {index}-th value returned by the function of {what} is {got}, but Tout expects {want} (TensorFlow "
        f"refuses it where {what} runs, in a Dataset.map or tf.function): return {want} values (numpy's "
        f".astype({want!r})) or name their dtype in Tout.")
