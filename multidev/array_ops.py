"""TensorFlow's array and math functions that TensorFlow's distributed-training docs use, as thin
aliases of torch functions with TensorFlow's argument names, defaults and dtypes.

Each is the torch function named in its docstring; where TensorFlow's default differs from torch's
(``transpose`` reverses every axis, ``argmax`` defaults to axis 0 and returns int64, Python numbers
become float32/int32, ``cast`` of floats to integers truncates toward zero) the TensorFlow rule is
kept, since that is what a program ported from ``tf.`` expects. Anything else is torch's: for the
rest of TensorFlow's op library, call torch directly (``md.<name>`` that TensorFlow has and multidev
does not raises an AttributeError naming the torch function).

Example:
    >>> x = md.reshape(md.range(6), (2, 3))
    >>> md.matmul(md.cast(x, md.float32), md.ones((3, 1))).tolist()
    [[3.0], [12.0]]
    >>> md.concat([x, x], axis=0).shape
    torch.Size([4, 3])
"""

from __future__ import annotations

import builtins
import numbers
from typing import Any, Sequence

import numpy as np
import torch

from multidev._core.eager_tensor import eager, readable_results
from multidev.ops import _as_dtype, _axes, _to_tensor, text_value
from multidev.values.base_variable import Variable


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None) -> torch.Tensor:
    """``value`` as a tensor (a tensor of the right dtype is returned as is); Python numbers become
    float32/int32; ``dtype_hint`` is used where the value converts to it (a float never to an int)."""
    if isinstance(value, Variable):   # TF reads it: a snapshot later assigns do not change, still differentiable
        with torch._C.DisableTorchFunctionSubclass():
            value = value._read().clone()
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.to(_as_dtype(dtype))
    if dtype is None and dtype_hint is not None:
        hint = _as_dtype(dtype_hint)
        if hint.is_floating_point or not _has_python_floats(value):
            dtype = hint
    return _to_tensor(value, _as_dtype(dtype))


def _has_python_floats(value) -> bool:
    return isinstance(value, float) or (isinstance(value, (list, tuple)) and builtins.any(_has_python_floats(v) for v in value))


def cast(x, dtype, name=None) -> torch.Tensor:
    """``x`` converted to ``dtype`` (``Tensor.to``): floats to integers truncate toward zero, as TF."""
    return _to_tensor(x, None).to(_as_dtype(dtype))


def reshape(tensor, shape, name=None) -> torch.Tensor:
    """``torch.reshape``; one entry of ``shape`` may be -1."""
    return torch.reshape(_to_tensor(tensor, None), tuple(int(s) for s in _ints(shape)))


def _ints(shape) -> list:
    if isinstance(shape, torch.Tensor):
        return shape.tolist() if shape.dim() else [shape.item()]
    return [shape] if isinstance(shape, numbers.Integral) else list(shape)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, name=None) -> torch.Tensor:
    """``torch.matmul`` of the two innermost dimensions, after the optional transposes/adjoints."""
    a, b = _to_tensor(a, None), _to_tensor(b, None)
    if transpose_a or adjoint_a:
        a = a.transpose(-2, -1).conj() if adjoint_a else a.transpose(-2, -1)
    if transpose_b or adjoint_b:
        b = b.transpose(-2, -1).conj() if adjoint_b else b.transpose(-2, -1)
    if a.dim() >= 2 and b.dim() >= 2 and a.shape[-1] != b.shape[-2]:
        from multidev._core.errors import InvalidArgumentError   # noqa: PLC0415
        raise InvalidArgumentError(f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)} "
                                   "[Op:MatMul] (the inner dimensions must be equal).")
    return torch.matmul(a, b)


def concat(values: Sequence, axis, name=None) -> torch.Tensor:
    """``torch.cat`` along ``axis``."""
    return torch.cat([_to_tensor(v, None) for v in values], dim=int(axis))


def stack(values: Sequence, axis=0, name=None) -> torch.Tensor:
    """``torch.stack`` along a new ``axis``, handed on as an ``EagerTensor`` (its slices take TensorFlow's
    ``set_shape``: the time_series tutorial splits ``tf.stack([...])`` windows with it)."""
    return eager(torch.stack([_to_tensor(v, None) for v in values], dim=int(axis)))


def unstack(value, num=None, axis=0, name=None) -> list[torch.Tensor]:
    """``torch.unbind`` along ``axis``."""
    return list(torch.unbind(_to_tensor(value, None), dim=int(axis)))


def split(value, num_or_size_splits, axis=0, num=None, name=None) -> list[torch.Tensor]:
    """An int splits into that many equal parts (ValueError if it does not divide), a list into those sizes."""
    x = _to_tensor(value, None)
    if isinstance(num_or_size_splits, numbers.Integral):
        n, size = int(num_or_size_splits), x.shape[int(axis)]
        if n <= 0 or size % n:
            raise ValueError(f"Dimension {int(axis)} of size {size} cannot be split into {n!r} equal parts; "
                             f"give a list of sizes instead.")
        return list(torch.split(x, size // n, dim=int(axis)))
    return list(torch.split(x, [int(s) for s in _ints(num_or_size_splits)], dim=int(axis)))


def expand_dims(input, axis, name=None) -> torch.Tensor:
    """``torch.unsqueeze``; text (md.data's numpy object arrays of str) gets numpy's new axis
    (text_classification's ``vectorize_text`` expands a batch of reviews before TextVectorization)."""
    text = text_value(input) if not isinstance(input, torch.Tensor) else None
    if text is not None:
        return text_value(np.expand_dims(np.asarray(text, dtype=object), int(axis)))
    return torch.unsqueeze(_to_tensor(input, None), int(axis))


def squeeze(input, axis=None, name=None) -> torch.Tensor:
    """``torch.squeeze``; an ``axis`` that is not of size 1 raises InvalidArgumentError, as TF."""
    from multidev._core.errors import InvalidArgumentError

    x = _to_tensor(input, None)
    if axis is None:
        return torch.squeeze(x)
    axes = [axis] if isinstance(axis, numbers.Integral) else list(axis)
    for a in axes:
        if x.shape[int(a)] != 1:
            raise InvalidArgumentError(f"Can not squeeze dim[{int(a)}], expected a dimension of 1, got {x.shape[int(a)]}")
    return torch.squeeze(x, tuple(int(a) for a in axes))


def transpose(a, perm=None, conjugate=False, name=None) -> torch.Tensor:
    """``torch.permute``; without ``perm`` every axis is reversed (TF's default, not torch's ``.T`` of 2 dims)."""
    x = _to_tensor(a, None)
    perm = list(reversed(range(x.dim()))) if perm is None else [int(p) for p in _ints(perm)]
    out = x.permute(perm)
    return out.conj() if conjugate else out


def tile(input, multiples, name=None) -> torch.Tensor:
    """``torch.Tensor.repeat``."""
    return _to_tensor(input, None).repeat(*[int(m) for m in _ints(multiples)])


def ones(shape, dtype=torch.float32, name=None) -> torch.Tensor:
    """``torch.ones``; float32 by default."""
    return torch.ones(tuple(int(s) for s in _ints(shape)), dtype=_as_dtype(dtype))


def zeros(shape, dtype=torch.float32, name=None) -> torch.Tensor:
    """``torch.zeros``; float32 by default."""
    return torch.zeros(tuple(int(s) for s in _ints(shape)), dtype=_as_dtype(dtype))


def ones_like(input, dtype=None, name=None) -> torch.Tensor:
    """``torch.ones_like``."""
    return torch.ones_like(_to_tensor(input, None), dtype=_as_dtype(dtype))


def zeros_like(input, dtype=None, name=None) -> torch.Tensor:
    """``torch.zeros_like``."""
    return torch.zeros_like(_to_tensor(input, None), dtype=_as_dtype(dtype))


def fill(dims, value, name=None) -> torch.Tensor:
    """``torch.full``; the dtype is the value's (Python floats float32, ints int32)."""
    v = _to_tensor(value, None)
    return torch.full(tuple(int(s) for s in _ints(dims)), v.item(), dtype=v.dtype)


def range(start, limit=None, delta=1, dtype=None, name="range") -> torch.Tensor:  # noqa: A001 - TF's name
    """``torch.arange``; ``md.range(5)`` counts from 0; Python ints give int32, floats float32."""
    if limit is None:
        start, limit = 0, start
    values = [_to_tensor(v, None) for v in (start, limit, delta)]
    inferred = torch.float32 if builtins.any(v.is_floating_point() for v in values) else values[0].dtype
    return torch.arange(values[0].item(), values[1].item(), values[2].item(), dtype=_as_dtype(dtype) or inferred)


def identity(input, name=None) -> torch.Tensor:
    """A copy of ``input`` (``Tensor.clone``)."""
    return _to_tensor(input, None).clone()


def shape(input, out_type=torch.int32, name=None) -> torch.Tensor:
    """The shape as an int32 tensor, as TF (``input.shape`` is the torch.Size)."""
    return torch.tensor(list(_to_tensor(input, None).shape), dtype=_as_dtype(out_type))


def size(input, out_type=torch.int32, name=None) -> torch.Tensor:
    """The number of elements as an int32 scalar tensor."""
    return torch.tensor(_to_tensor(input, None).numel(), dtype=_as_dtype(out_type))


def rank(input, name=None) -> torch.Tensor:
    """The number of dimensions as an int32 scalar tensor."""
    return torch.tensor(_to_tensor(input, None).dim(), dtype=torch.int32)


def gather(params, indices, axis=None, batch_dims=0, name=None) -> torch.Tensor:
    """``torch.index_select`` along ``axis`` (0 by default) with indices of any shape."""
    if batch_dims:
        raise ValueError(f"md.gather supports batch_dims=0 only, got {batch_dims!r}; use torch.gather for batched indexing.")
    x, idx = _to_tensor(params, None), _to_tensor(indices, None).long()
    axis = 0 if axis is None else int(axis) % x.dim()
    if idx.device.type == "cpu" and idx.numel():   # (TF's GPU kernel gives zeros instead: no check, no sync)
        _check_gather_indices(idx, x.shape[axis])
    out = torch.index_select(x, axis, idx.reshape(-1))
    return out.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])


def _check_gather_indices(idx: torch.Tensor, size: int) -> None:
    """TF's CPU error for an index outside ``[0, size)`` (the tf.function guide's unused gather catches
    ``tf.errors.InvalidArgumentError``); torch would raise IndexError or read out of bounds."""
    bad = (idx < 0) | (idx >= size)
    if bool(bad.any()):
        from multidev._core.errors import InvalidArgumentError
        position = tuple(int(p) for p in torch.argwhere(bad)[0])
        raise InvalidArgumentError(f"indices{list(position)} = {int(idx[position])} is not in [0, {size}) "
                                   "(md.gather's indices must index the gathered axis).")


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None) -> torch.Tensor:
    """``torch.nn.functional.one_hot`` as float32 (TF's default); out-of-range indices give all-off rows."""
    idx = _to_tensor(indices, None).long()
    on = 1.0 if on_value is None else on_value
    off = 0.0 if off_value is None else off_value
    valid = (idx >= 0) & (idx < int(depth))
    hot = torch.nn.functional.one_hot(torch.where(valid, idx, 0), int(depth)) * valid.unsqueeze(-1)
    out = torch.where(hot.bool(), torch.tensor(on), torch.tensor(off)).to(_as_dtype(dtype) or torch.float32)
    return out if axis is None or axis == -1 else out.movedim(-1, int(axis))


def where(condition, x=None, y=None, name=None) -> torch.Tensor:
    """``torch.where``; with only ``condition``, the int64 coordinates of true elements (``torch.argwhere``)."""
    cond = _to_tensor(condition, None).bool()
    if x is None and y is None:
        return torch.argwhere(cond)
    return torch.where(cond, _to_tensor(x, None), _to_tensor(y, None))


def argmax(input, axis=None, output_type=torch.int64, name=None) -> torch.Tensor:
    """``torch.argmax``; ``axis=None`` means axis 0 (TF's rule, not torch's flattening); int64."""
    return torch.argmax(_to_tensor(input, None), dim=0 if axis is None else int(axis)).to(_as_dtype(output_type))


def argmin(input, axis=None, output_type=torch.int64, name=None) -> torch.Tensor:
    """``torch.argmin``; ``axis=None`` means axis 0; int64."""
    return torch.argmin(_to_tensor(input, None), dim=0 if axis is None else int(axis)).to(_as_dtype(output_type))


def _reduce(fn):
    def reduce(input_tensor, axis=None, keepdims=False, name=None) -> torch.Tensor:
        x = _to_tensor(input_tensor, None)
        axes = _axes(x, axis)
        if axes == ():
            return x.clone()
        if axes is None:
            out = fn(x.reshape(-1), 0)
            return out.reshape([1] * x.dim()) if keepdims else out
        for a in sorted(axes, reverse=True):
            x = fn(x, a, keepdim=keepdims) if keepdims else fn(x, a)
        return x
    return reduce


def _amax(x, dim, keepdim=False):
    return torch.amax(x, dim=dim, keepdim=keepdim)


def _amin(x, dim, keepdim=False):
    return torch.amin(x, dim=dim, keepdim=keepdim)


def _prod(x, dim, keepdim=False):
    return torch.prod(x, dim=dim, keepdim=keepdim, dtype=x.dtype)  # TF keeps int32 (torch would promote)


def _any(x, dim, keepdim=False):
    return torch.any(x.bool(), dim=dim, keepdim=keepdim)


def _all(x, dim, keepdim=False):
    return torch.all(x.bool(), dim=dim, keepdim=keepdim)


reduce_max = _reduce(_amax)
reduce_max.__doc__ = "``torch.amax`` over ``axis`` (an int, a list, or None for all)."
reduce_min = _reduce(_amin)
reduce_min.__doc__ = "``torch.amin`` over ``axis``."
reduce_prod = _reduce(_prod)
reduce_prod.__doc__ = "``torch.prod`` over ``axis``."
reduce_any = _reduce(_any)
reduce_any.__doc__ = "``torch.any`` over ``axis`` (bool)."
reduce_all = _reduce(_all)
reduce_all.__doc__ = "``torch.all`` over ``axis`` (bool)."


def _binary(fn, doc: str):
    def op(x, y, name=None) -> torch.Tensor:
        return fn(_to_tensor(x, None), _to_tensor(y, None))
    op.__doc__ = doc
    return op


def _unary(fn, doc: str):
    def op(x, name=None) -> torch.Tensor:
        return fn(_to_tensor(x, None))
    op.__doc__ = doc
    return op


add = _binary(torch.add, "``torch.add``.")
subtract = _binary(torch.subtract, "``torch.subtract``.")
multiply = _binary(torch.multiply, "``torch.multiply``.")
def divide(x, y, name=None) -> torch.Tensor:
    """``torch.true_divide``; integers divide into float64 (int32/int64) or float32 (smaller), as TF."""
    x, y = _to_tensor(x, None), _to_tensor(y, None)
    if not (x.is_floating_point() or x.is_complex() or y.is_floating_point() or y.is_complex()):
        wide = torch.float64 if torch.promote_types(x.dtype, y.dtype) in (torch.int32, torch.int64) else torch.float32
        x, y = x.to(wide), y.to(wide)
    return torch.true_divide(x, y)


maximum = _binary(torch.maximum, "``torch.maximum``.")
minimum = _binary(torch.minimum, "``torch.minimum``.")
equal = _binary(torch.eq, "``torch.eq`` (bool).")
not_equal = _binary(torch.ne, "``torch.ne`` (bool).")
greater = _binary(torch.gt, "``torch.gt`` (bool).")
greater_equal = _binary(torch.ge, "``torch.ge`` (bool).")
less = _binary(torch.lt, "``torch.lt`` (bool).")
less_equal = _binary(torch.le, "``torch.le`` (bool).")
pow = _binary(torch.pow, "``torch.pow``.")  # noqa: A001 - TF's name
square = _unary(torch.square, "``torch.square``.")
sqrt = _unary(torch.sqrt, "``torch.sqrt``.")
exp = _unary(torch.exp, "``torch.exp``.")
log = _unary(torch.log, "``torch.log`` (natural logarithm).")
abs = _unary(torch.abs, "``torch.abs``.")  # noqa: A001 - TF's name
negative = _unary(torch.neg, "``torch.neg``.")
sign = _unary(torch.sign, "``torch.sign``.")
round = _unary(torch.round, "``torch.round`` (half to even, as TF).")  # noqa: A001 - TF's name
sigmoid = _unary(torch.sigmoid, "``torch.sigmoid``.")
tanh = _unary(torch.tanh, "``torch.tanh``.")


def clip_by_value(t, clip_value_min, clip_value_max, name=None) -> torch.Tensor:
    """``torch.clamp``."""
    x = _to_tensor(t, None)
    lo, hi = (_to_tensor(v, None).to(x.dtype) for v in (clip_value_min, clip_value_max))
    return torch.clamp(x, lo, hi)


def clip_by_norm(t, clip_norm, axes=None, name=None) -> torch.Tensor:
    """``t * clip_norm / max(l2norm(t), clip_norm)``: TensorFlow's rescaling of ``t`` to an L2 norm of at
    most ``clip_norm`` (over ``axes``, default all), as the advanced-autodiff guide's gradient clipping uses.

    Example:
        >>> md.clip_by_norm(md.constant([3.0, 4.0]), 1.0).tolist()   # norm 5 -> 1
        [0.6000000238418945, 0.800000011920929]
    """
    x = _to_tensor(t, None)
    if not x.is_floating_point():
        raise TypeError(f"clip_by_norm expects a floating tensor (TF's clip_by_norm is for gradients), got "
                        f"dtype {x.dtype!r}; cast it first: md.cast(t, md.float32).")
    norm = _to_tensor(clip_norm, None).to(x.dtype)
    dims = None if axes is None else ([axes] if isinstance(axes, int) else [int(a) for a in axes])
    l2 = torch.sqrt(torch.sum(x * x) if dims is None else torch.sum(x * x, dim=dims, keepdim=True))
    return x * norm / torch.maximum(l2, norm)


def _reexported() -> list[str]:
    return [n for n, v in globals().items() if callable(v) and not n.startswith("_") and getattr(v, "__module__", "")
            == __name__ and n not in ("Any", "Sequence")]


__all__: list[str] = sorted(_reexported())
for _name in __all__:   # results a TF program reads with .numpy() while they carry gradients
    globals()[_name] = readable_results(globals()[_name], _name)
#: The names TensorFlow has at top level (``tf.log`` is only ``tf.math.log``): re-exported as ``md.<name>``.
TOP_LEVEL: list[str] = [n for n in __all__ if n != "log"]
