"""TensorFlow's basic tensor functions on torch tensors: ``md.constant``, ``md.reduce_sum``,
``md.reduce_mean``, ``md.add_n``.

Example:
    >>> x = md.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> md.reduce_sum(x, axis=1).tolist(), md.reduce_mean(x).item()
    ([3.0, 7.0], 2.5)
    >>> md.add_n([x, x, x])[0].tolist()
    [3.0, 6.0]
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from multidev._core.eager_tensor import readable_results
from multidev._core.python_numbers import with_tf_dtype
from multidev._core.errors import InvalidArgumentError
from multidev.data.text import user_facing


def _as_dtype(dtype) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"Unknown dtype {dtype!r}; use a torch dtype or a name such as 'float32', 'int32', 'bool'.")
    return found


def _to_tensor(value: Any, dtype: torch.dtype | None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.to(dtype)
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"Cannot convert {value!r} to a tensor (ragged or non-numeric).")
    tensor = torch.as_tensor(array)
    return with_tf_dtype(value, tensor) if dtype is None else tensor.to(dtype)


def text_value(value: Any):
    """``value`` as md.data's text (a ``Text`` str, or a ``TextArray`` numpy object array of them) when it holds
    strings, else ``None``: torch has no string tensors, and a batch of text from an ``md.data.Dataset`` is
    this (text_classification's ``export_model.predict(tf.constant(["The movie was great!", ...]))``)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        return user_facing(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value, dtype=object) if isinstance(value, np.ndarray) else np.array(value)
        if array.dtype.kind in "US" or (array.dtype == object and array.size
                                        and all(isinstance(v, (str, bytes)) for v in array.flat)):
            flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in array.flat]
            return user_facing(np.array(flat, dtype=object).reshape(array.shape))
    return None


def constant(value, dtype=None, shape=None, name=None) -> torch.Tensor:
    """A tensor holding ``value`` (Python numbers become float32/int32, as in TensorFlow).

    With ``shape``, a scalar is filled to that shape and a value with as many elements is reshaped;
    anything else raises TypeError.

    Example:
        >>> md.constant(0.5, shape=(2, 2)).tolist()
        [[0.5, 0.5], [0.5, 0.5]]
    """
    text = text_value(value) if shape is None and not isinstance(value, torch.Tensor) else None
    if text is not None:
        return text
    tensor = _to_tensor(value, _as_dtype(dtype))
    if isinstance(value, torch.Tensor):
        tensor = tensor.clone()
    if shape is None:
        return tensor
    shape = tuple(int(s) for s in (shape if isinstance(shape, (list, tuple, torch.Size)) else [shape]))
    count = int(np.prod(shape)) if shape else 1
    if tensor.numel() == 1:
        return tensor.reshape(()).expand(shape).clone()
    if tensor.numel() == count:
        return tensor.reshape(shape)
    raise TypeError(f"Eager execution of md.constant with unsupported shape. Tensor {value!r} has {tensor.numel()} "
                    f"elements, but got `shape` {shape} with {count} elements.")


def _axes(tensor: torch.Tensor, axis) -> tuple[int, ...] | None:
    if axis is None:
        return None
    if isinstance(axis, torch.Tensor):
        axis = axis.tolist()
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    rank = tensor.dim()
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not -max(rank, 1) <= a < max(rank, 1):
            raise InvalidArgumentError(f"Invalid reduction dimension {a!r} for input with {rank} dimensions; "
                                       f"axis must be in [{-max(rank, 1)}, {max(rank, 1)}).")
    return tuple(int(a) % max(rank, 1) for a in axes)


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None) -> torch.Tensor:
    """Sum over ``axis`` (an int, a list, or None for all); integer inputs keep their dtype.

    Example:
        >>> md.reduce_sum(md.constant([[1, 1, 1], [1, 1, 1]]), axis=0).tolist()
        [2, 2, 2]
    """
    x = _to_tensor(input_tensor, None)
    axes = _axes(x, axis)
    dtype = x.dtype if not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool else None
    if axes == ():
        return x.clone()
    if axes is None:
        out = torch.sum(x, dtype=dtype)
        return out.reshape([1] * x.dim()) if keepdims else out
    return torch.sum(x, dim=axes, keepdim=keepdims, dtype=dtype)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None) -> torch.Tensor:
    """Mean over ``axis``; integer inputs give an integer mean (truncated), as in TensorFlow.

    Example:
        >>> md.reduce_mean(md.constant([1, 2])).item()    # integer mean, as TF
        1
    """
    x = _to_tensor(input_tensor, None)
    axes = _axes(x, axis)
    if axes == ():
        return x.clone()
    if x.is_floating_point() or x.is_complex():
        if axes is None:
            out = torch.mean(x)
            return out.reshape([1] * x.dim()) if keepdims else out
        return torch.mean(x, dim=axes, keepdim=keepdims)
    total = reduce_sum(x, axis, keepdims)
    count = x.numel() if axes is None else int(np.prod([x.shape[a] for a in axes]))
    return torch.div(total, max(count, 1), rounding_mode="trunc").to(total.dtype)


def add_n(inputs, name=None) -> torch.Tensor:
    """Element-wise sum of a list of tensors of the same shape and dtype.

    Example:
        >>> md.add_n([md.constant([1.0, 2.0]), md.constant([3.0, 4.0])]).tolist()
        [4.0, 6.0]
    """
    if isinstance(inputs, torch.Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError(f"inputs must be a list of at least one Tensor with the same dtype and shape, got {inputs!r}.")
    tensors = [_to_tensor(t, None) for t in inputs]
    first = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ValueError(f"inputs must be a list of at least one Tensor with the same dtype and shape: input 0 "
                             f"is {first.dtype} {tuple(first.shape)}, input {i} is {t.dtype} {tuple(t.shape)}.")
    out = first
    for t in tensors[1:]:
        out = out + t
    return out


# Results a TF program reads with .numpy() while they carry gradients (``loss.numpy()`` after a tape).
reduce_sum, reduce_mean, add_n = (readable_results(op) for op in (reduce_sum, reduce_mean, add_n))

__all__ = ["constant", "reduce_sum", "reduce_mean", "add_n"]
