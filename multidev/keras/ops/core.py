"""``md.keras.ops`` core: tensors from Python/numpy values with Keras 3's dtype rules, casts, shapes.

Keras 3 turns Python ints into int32 and Python floats into float32 (numpy arrays keep their dtype,
numpy scalars follow the Python rule); every other op of ``md.keras.ops`` goes through
``convert_to_tensor`` so the same program gives the same dtypes under ``keras`` and ``md.keras``.

Example:
    from multidev.keras import ops
    ops.convert_to_tensor([1, 2]).dtype      # torch.int32, as keras.ops
"""

from __future__ import annotations

import builtins

import numpy as np
import torch

from multidev.keras import backend
from multidev.keras.state_variable import StateVariable

_INT_TYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def standardize_dtype(dtype) -> torch.dtype:
    """A Keras/numpy dtype name, numpy dtype or torch dtype as a ``torch.dtype``."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    return backend.as_dtype(dtype)


def _python_dtype(value) -> torch.dtype:
    """Keras 3's dtype for a (nested) Python value: bool, int32 or float32 (floatx)."""
    flat = np.asarray(value)
    if flat.dtype == np.bool_:
        return torch.bool
    if np.issubdtype(flat.dtype, np.integer):
        return torch.int32
    if np.issubdtype(flat.dtype, np.complexfloating):
        return torch.complex64
    return backend.as_dtype(backend.floatx())


def convert_to_tensor(x, dtype=None, sparse=None, ragged=None):
    """``x`` as a ``torch.Tensor`` (tensors are returned as they are unless ``dtype`` differs)."""
    target = None if dtype is None else standardize_dtype(dtype)
    if isinstance(x, StateVariable):
        x = x.value
    if isinstance(x, torch.Tensor):
        return x if target is None or x.dtype == target else x.to(target)
    if isinstance(x, np.ndarray):
        tensor = torch.from_numpy(np.ascontiguousarray(x))
        return tensor if target is None else tensor.to(target)
    if hasattr(x, "__array__") and not isinstance(x, (list, tuple, np.generic)):
        return convert_to_tensor(np.asarray(x), dtype)
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        return torch.stack([convert_to_tensor(e, dtype) for e in x])
    return torch.tensor(x, dtype=target or _python_dtype(x))


def convert_to_numpy(x):
    """A numpy array of ``x`` (detached, on the CPU)."""
    if isinstance(x, StateVariable):
        x = x.value
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def is_tensor(x) -> bool:
    """Whether ``x`` is a tensor of this backend (``torch.Tensor``)."""
    return isinstance(x, torch.Tensor)


def cast(x, dtype):
    """``x`` converted to ``dtype`` (floats to ints truncate toward zero, as Keras on torch)."""
    return convert_to_tensor(x).to(standardize_dtype(dtype))


def dtype(x) -> str:
    """The Keras name of ``x``'s dtype ('float32', 'int64', ...)."""
    return str(convert_to_tensor(x).dtype).replace("torch.", "")


def shape(x) -> tuple:
    """The static shape of ``x`` as a tuple of ints."""
    if isinstance(x, torch.Tensor):
        return tuple(x.shape)
    return tuple(np.shape(x))


def size(x):
    """The number of elements of ``x`` (a scalar tensor)."""
    return torch.tensor(convert_to_tensor(x).numel())


def stop_gradient(variable):
    """``variable`` detached from the autograd graph."""
    return convert_to_tensor(variable).detach()


def cond(pred, true_fn, false_fn):
    """``true_fn()`` if ``pred`` else ``false_fn()`` (eager: a Python branch)."""
    return true_fn() if bool(pred) else false_fn()


def fori_loop(lower, upper, body_fun, init_val):
    """``init_val`` passed through ``body_fun(i, val)`` for i in [lower, upper)."""
    val = init_val
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)`` (a tuple in, a tuple out)."""
    single = not isinstance(loop_vars, (list, tuple))
    values = (loop_vars,) if single else tuple(loop_vars)
    count = 0
    while cond(*values) and (maximum_iterations is None or count < maximum_iterations):
        out = body(*values)
        values = (out,) if single else tuple(out)
        count += 1
    return values[0] if single else values


def slice(inputs, start_indices, shape):  # noqa: A001 - Keras's name
    """The block of ``inputs`` of size ``shape`` starting at ``start_indices``."""
    inputs = convert_to_tensor(inputs)
    index = tuple(builtins.slice(int(s), int(s) + int(n)) for s, n in zip(start_indices, shape))
    return inputs[index]


def slice_update(inputs, start_indices, updates):
    """A copy of ``inputs`` with ``updates`` written at ``start_indices``."""
    out = convert_to_tensor(inputs).clone()
    updates = convert_to_tensor(updates, out.dtype)
    index = tuple(builtins.slice(int(s), int(s) + n) for s, n in zip(start_indices, updates.shape))
    out[index] = updates
    return out


def scatter(indices, values, shape):
    """A zero tensor of ``shape`` with ``values`` added at ``indices`` (duplicates sum)."""
    values = convert_to_tensor(values)
    indices = convert_to_tensor(indices).long()
    out = torch.zeros(tuple(shape), dtype=values.dtype, device=values.device)
    out.index_put_(tuple(indices.unbind(-1)), values, accumulate=True)
    return out


def unstack(x, num=None, axis=0):
    """The slices of ``x`` along ``axis`` as a list."""
    return list(convert_to_tensor(x).unbind(axis))


__all__ = ["convert_to_tensor", "convert_to_numpy", "is_tensor", "cast", "dtype", "shape", "size", "stop_gradient",
           "cond", "fori_loop", "while_loop", "slice", "slice_update", "scatter", "unstack", "standardize_dtype"]
