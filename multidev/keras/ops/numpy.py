"""``md.keras.ops`` numpy-like ops: Keras 3's ``keras.ops.numpy`` on torch tensors.

Each op converts its inputs with ``convert_to_tensor`` (Keras 3's dtype rules) and keeps Keras's
result dtypes where they differ from torch's: float ops on ints give float32, ``sum`` of bools
gives int32, ``argmax`` gives int32, ``axis=None`` reduces over every axis.

Example:
    ops.mean(ops.square(y_true - y_pred), axis=-1)
"""

from __future__ import annotations

import builtins

import numpy as np
import torch

from multidev.keras import backend
from multidev.keras._missing import flat_namespace_names
from multidev.keras.ops.core import convert_to_tensor, standardize_dtype

_t = convert_to_tensor


def _float(x):
    """``x`` as a tensor, ints and bools promoted to floatx (Keras's rule for float-valued ops)."""
    x = _t(x)
    return x if x.is_floating_point() or x.is_complex() else x.to(backend.as_dtype(backend.floatx()))


def _dims(x, axis):
    """``axis`` (None, int, list or tuple) as a tuple of dims of ``x`` (None: all of them)."""
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)


def _reduce(fn, x, axis, keepdims):
    dims = _dims(x, axis)
    if x.ndim == 0 or not dims:
        return x.clone()
    return fn(x, dim=dims, keepdim=keepdims)


# ---- creation -------------------------------------------------------------------------------------
def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop): int32 for ints, float32 for floats (Keras's default)."""
    values = [v for v in (start, stop, step) if v is not None]
    if dtype is None:
        dtype = "float32" if builtins.any(isinstance(v, float) for v in values) else "int32"
    if stop is None:
        start, stop = 0, start
    return torch.arange(start, stop, 1 if step is None else step, dtype=standardize_dtype(dtype))


def _dtype_or_floatx(dtype):
    return standardize_dtype(backend.floatx() if dtype is None else dtype)


def ones(shape, dtype=None):
    """A tensor of ones (floatx unless ``dtype``)."""
    return torch.ones(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), dtype=_dtype_or_floatx(dtype))


def zeros(shape, dtype=None):
    """A tensor of zeros (floatx unless ``dtype``)."""
    return torch.zeros(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), dtype=_dtype_or_floatx(dtype))


def full(shape, fill_value, dtype=None):
    """A tensor of ``fill_value`` (floatx unless ``dtype``, as Keras 3)."""
    return torch.full(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), fill_value,
                      dtype=_dtype_or_floatx(dtype))


def ones_like(x, dtype=None):
    """Ones shaped like ``x`` (its dtype unless ``dtype``)."""
    x = _t(x)
    return torch.ones_like(x, dtype=None if dtype is None else standardize_dtype(dtype))


def zeros_like(x, dtype=None):
    """Zeros shaped like ``x`` (its dtype unless ``dtype``)."""
    x = _t(x)
    return torch.zeros_like(x, dtype=None if dtype is None else standardize_dtype(dtype))


def copy(x):
    """A new tensor with ``x``'s values (Keras 3's ``ops.copy``: a clone, differentiable as torch's).

    Deep Dream's ``img = ops.copy(original_img)``: later in-place ``+=`` on ``img`` leaves the original."""
    return _t(x).clone()


def full_like(x, fill_value, dtype=None):
    """``fill_value`` shaped like ``x``."""
    x = _t(x)
    return torch.full_like(x, fill_value, dtype=None if dtype is None else standardize_dtype(dtype))


def eye(N, M=None, k=0, dtype=None):
    """An N x M matrix with ones on the k-th diagonal."""
    ones = torch.ones(N, N if M is None else M, dtype=_dtype_or_floatx(dtype))
    return ones.triu(k) - ones.triu(k + 1)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``num`` evenly spaced floats from ``start`` to ``stop`` (scalar ends)."""
    count = num if endpoint else num + 1
    out = torch.linspace(float(start), float(stop), count, dtype=_dtype_or_floatx(dtype))[:num]
    step = (float(stop) - float(start)) / builtins.max(count - 1, 1)
    return (out, step) if retstep else out


# ---- shape ----------------------------------------------------------------------------------------
def reshape(x, newshape):
    """``x`` with shape ``newshape`` (-1 infers one dimension)."""
    return _t(x).reshape(tuple(newshape) if isinstance(newshape, (list, tuple)) else (newshape,))


def transpose(x, axes=None):
    """``x`` with its axes permuted (reversed when ``axes`` is None)."""
    x = _t(x)
    return x.permute(*(reversed(range(x.ndim)) if axes is None else axes))


def expand_dims(x, axis):
    """``x`` with a new axis of length 1 at ``axis`` (a tuple inserts several)."""
    x = _t(x)
    for a in sorted(a % (x.ndim + len(_dims(x, axis))) for a in _dims(x, axis)):
        x = x.unsqueeze(a)
    return x


def squeeze(x, axis=None):
    """``x`` without the length-1 axes (or only ``axis``, which must have length 1)."""
    x = _t(x)
    dims = [d for d in range(x.ndim) if x.shape[d] == 1] if axis is None else [a % x.ndim for a in _dims(x, axis)]
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"Cannot squeeze axis {d} of a tensor of shape {tuple(x.shape)}: its length is not 1.")
    return x.squeeze(tuple(dims)) if dims else x


def concatenate(xs, axis=0):
    """The tensors of ``xs`` joined along ``axis``."""
    return torch.cat([_t(x) for x in xs], dim=axis)


def stack(x, axis=0):
    """The tensors of ``x`` stacked along a new ``axis``."""
    return torch.stack([_t(e) for e in x], dim=axis)


def split(x, indices_or_sections, axis=0):
    """``x`` split into equal sections (an int) or at the given indices (a list)."""
    x = _t(x)
    if isinstance(indices_or_sections, int):
        if x.shape[axis] % indices_or_sections:
            raise ValueError(f"split: axis {axis} of length {x.shape[axis]} does not divide into "
                             f"{indices_or_sections} equal sections.")
        return list(torch.split(x, x.shape[axis] // indices_or_sections, dim=axis))
    return list(torch.tensor_split(x, list(indices_or_sections), dim=axis))


def tile(x, repeats):
    """``x`` repeated ``repeats`` times along each axis (``repeats`` an int, a sequence, or a tensor of them,
    as keras.io's causal masks build it: ``ops.concatenate([ops.expand_dims(batch_size, -1), ...])``)."""
    if isinstance(repeats, (torch.Tensor, np.ndarray)):
        repeats = repeats.tolist()
    return _t(x).tile(tuple(int(r) for r in repeats) if isinstance(repeats, (list, tuple)) else (int(repeats),))


def repeat(x, repeats, axis=None):
    """Each element of ``x`` repeated (flattened first when ``axis`` is None); ``repeats`` an int, or a list or
    tensor of counts (one count repeats every element: keras.io's conditional GAN's ``repeats=[28 * 28]``)."""
    x = _t(x)
    x, dim = (x.reshape(-1), 0) if axis is None else (x, axis)
    if isinstance(repeats, (list, tuple, np.ndarray)) or isinstance(repeats, torch.Tensor) and repeats.ndim:
        repeats = torch.as_tensor(repeats, dtype=torch.long, device=x.device).reshape(-1)
        repeats = int(repeats[0]) if repeats.numel() == 1 else repeats
    return torch.repeat_interleave(x, repeats, dim=dim)


def swapaxes(x, axis1, axis2):
    """``x`` with two axes exchanged."""
    return _t(x).transpose(axis1, axis2)


def moveaxis(x, source, destination):
    """``x`` with axes moved from ``source`` to ``destination``."""
    return torch.movedim(_t(x), source, destination)


def flip(x, axis=None):
    """``x`` reversed along ``axis`` (every axis when None)."""
    x = _t(x)
    return torch.flip(x, _dims(x, axis))


def roll(x, shift, axis=None):
    """``x`` rolled by ``shift`` along ``axis`` (flattened when None)."""
    return torch.roll(_t(x), shift, dims=axis)


def take(x, indices, axis=None):
    """Elements of ``x`` at ``indices`` along ``axis`` (flattened when None)."""
    x, indices = _t(x), _t(indices).long()
    if axis is None:
        return x.reshape(-1)[indices]
    return torch.index_select(x, axis, indices.reshape(-1)).reshape(
        x.shape[:axis % x.ndim] + indices.shape + x.shape[axis % x.ndim + 1:])


def take_along_axis(x, indices, axis=None):
    """``x`` gathered along ``axis`` at ``indices`` (same rank as ``x``)."""
    x, indices = _t(x), _t(indices).long()
    if axis is None:
        return x.reshape(-1)[indices.reshape(-1)]
    return torch.take_along_dim(x, indices, dim=axis)


def pad(x, pad_width, mode="constant", constant_values=None):
    """``x`` padded by ``pad_width`` ((before, after) per axis)."""
    x = _t(x)
    widths = [tuple(w) for w in pad_width] if isinstance(pad_width[0], (list, tuple)) else [tuple(pad_width)] * x.ndim
    flat = [v for before, after in reversed(widths) for v in (before, after)]
    if mode == "constant":
        return torch.nn.functional.pad(x, flat, value=0 if constant_values is None else constant_values)
    if mode not in ("reflect", "circular"):
        raise ValueError(f"md.keras.ops.pad supports mode 'constant', 'reflect' or 'circular'; received mode={mode!r}. "
                         "Keras 3 (on multidev) has 'symmetric' too.")
    while len(flat) > 2 and flat[-2:] == [0, 0]:   # torch pads at most the last 3 axes: drop unpadded leading ones
        flat = flat[:-2]
    return torch.nn.functional.pad(x.unsqueeze(0), flat, mode=mode).squeeze(0)


def tril(x, k=0):
    """The lower triangle of ``x`` (k-th diagonal and below)."""
    return torch.tril(_t(x), k)


def triu(x, k=0):
    """The upper triangle of ``x`` (k-th diagonal and above)."""
    return torch.triu(_t(x), k)


def meshgrid(*x, indexing="xy"):
    """Coordinate grids from 1-D tensors."""
    return list(torch.meshgrid(*[_t(e) for e in x], indexing=indexing))


# ---- reductions -----------------------------------------------------------------------------------
def sum(x, axis=None, keepdims=False):  # noqa: A001 - Keras's name
    """Sum over ``axis``: bools count as int32, other dtypes are kept."""
    x = _t(x)
    out = _reduce(torch.sum, x, axis, keepdims)
    return out.to(torch.int32 if x.dtype == torch.bool else x.dtype)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (ints give float32)."""
    return _reduce(torch.mean, _float(x), axis, keepdims)


def max(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    """Maximum over ``axis`` (at least ``initial``)."""
    out = _reduce(torch.amax, _t(x), axis, keepdims)
    return out if initial is None else torch.clamp(out, min=initial)


def min(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    """Minimum over ``axis`` (at most ``initial``)."""
    out = _reduce(torch.amin, _t(x), axis, keepdims)
    return out if initial is None else torch.clamp(out, max=initial)


def amax(x, axis=None, keepdims=False):
    """Maximum over ``axis`` (Keras 3's numpy name; keras.io's DQN takes ``amax`` of the target's Q-values)."""
    return max(x, axis, keepdims)


def amin(x, axis=None, keepdims=False):
    """Minimum over ``axis`` (Keras 3's numpy name)."""
    return min(x, axis, keepdims)


def prod(x, axis=None, keepdims=False, dtype=None):
    """Product over ``axis``; ints keep their dtype, bools and small ints give int32 (torch gives int64)."""
    x = _t(x, dtype)
    out = x.reshape(-1).prod() if axis is None else x
    if axis is not None:
        for d in sorted((a % x.ndim for a in _dims(x, axis)), reverse=True):
            out = out.prod(dim=d, keepdim=keepdims)
    elif keepdims:
        out = out.reshape((1,) * x.ndim)
    small = (torch.bool, torch.uint8, torch.int8, torch.int16)
    return out.to(torch.int32 if x.dtype in small else x.dtype)


def std(x, axis=None, keepdims=False):
    """Population standard deviation over ``axis``."""
    return _reduce(lambda t, dim, keepdim: torch.std(t, dim=dim, keepdim=keepdim, correction=0),
                   _float(x), axis, keepdims)


def var(x, axis=None, keepdims=False):
    """Population variance over ``axis``."""
    return _reduce(lambda t, dim, keepdim: torch.var(t, dim=dim, keepdim=keepdim, correction=0),
                   _float(x), axis, keepdims)


def any(x, axis=None, keepdims=False):  # noqa: A001
    """Whether any element along ``axis`` is true."""
    return _reduce(torch.any, _t(x).bool(), axis, keepdims) if _t(x).ndim else _t(x).bool()


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element along ``axis`` is true."""
    return _reduce(torch.all, _t(x).bool(), axis, keepdims) if _t(x).ndim else _t(x).bool()


def _arg(fn, x, axis, keepdims):
    x = _t(x)
    if x.dtype == torch.bool:   # torch's argmax/argmin refuse bool; Keras 3 casts it
        x = x.to(torch.uint8)
    if axis is None:
        out = fn(x.reshape(-1))
        return (out.reshape((1,) * x.ndim) if keepdims else out).to(torch.int32)
    return fn(x, dim=axis, keepdim=keepdims).to(torch.int32)


def broadcast_to(x, shape):
    """``x`` broadcast to ``shape`` (a view, as numpy's)."""
    return torch.broadcast_to(_t(x), tuple(int(d) for d in shape))


def argmax(x, axis=None, keepdims=False):
    """Index of the maximum along ``axis`` (of the flattened ``x`` when None), int32."""
    return _arg(torch.argmax, x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    """Index of the minimum along ``axis`` (of the flattened ``x`` when None), int32."""
    return _arg(torch.argmin, x, axis, keepdims)


def argsort(x, axis=-1):
    """Indices that sort ``x`` along ``axis`` (int32)."""
    return torch.argsort(_t(x), dim=axis, stable=True).to(torch.int32)


def sort(x, axis=-1):
    """``x`` sorted along ``axis``."""
    return torch.sort(_t(x), dim=axis).values


def cumsum(x, axis=None, dtype=None):
    """Running sum along ``axis`` (flattened when None)."""
    x = _t(x, dtype)
    out = torch.cumsum(x.reshape(-1) if axis is None else x, dim=0 if axis is None else axis)
    return out.to(torch.int32 if x.dtype == torch.bool else x.dtype)


def count_nonzero(x, axis=None):
    """Number of non-zero elements along ``axis`` (int32)."""
    x = _t(x)
    return torch.count_nonzero(x, dim=_dims(x, axis)).to(torch.int32)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector (or matrix, for two axes) norm; Frobenius/2-norm by default."""
    x = _float(x)
    if axis is None:
        return torch.linalg.vector_norm(x, 2 if ord is None else ord, dim=None, keepdim=keepdims)
    if isinstance(axis, (list, tuple)) and len(axis) == 2:
        return torch.linalg.matrix_norm(x, "fro" if ord is None else ord, dim=tuple(axis), keepdim=keepdims)
    return torch.linalg.vector_norm(x, 2 if ord is None else ord, dim=axis, keepdim=keepdims)


def average(x, axis=None, weights=None):
    """Mean along ``axis`` weighted by ``weights``."""
    x = _float(x)
    if weights is None:
        return mean(x, axis)
    w = _float(weights)
    if axis is not None and w.ndim == 1 and x.ndim > 1:
        shape = [1] * x.ndim
        shape[axis] = -1
        w = w.reshape(shape)
    return sum(x * w, axis) / sum(w * torch.ones_like(x), axis)


__getattr__ = flat_namespace_names(__name__, "ops.numpy", globals(), "multidev.keras.ops")
