"""More of ``keras.ops.numpy``'s array ops on torch: stacking and splitting, rotation, differences,
searching, products and creation.

Dtypes follow Keras 3 on its torch backend: ``nonzero``, ``digitize`` and ``searchsorted`` give int32,
``cumprod`` of bools gives int32, ``tri``/``empty`` default to floatx.

Example:
    edges = ops.diff(ops.cumsum(x, axis=1), axis=1)
    bucket = ops.digitize(values, [0.0, 0.5, 1.0])
"""

from __future__ import annotations

import torch

from multidev.keras import backend
from multidev.keras.ops.core import convert_to_tensor, standardize_dtype
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def _dtype_or_floatx(dtype):
    return standardize_dtype(backend.floatx() if dtype is None else dtype)


def _shape(shape):
    return tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)


# ---- shape ------------------------------------------------------------------------------------------
def ndim(x):
    """The number of axes of ``x`` (a Python int)."""
    return _t(x).ndim


def ravel(x):
    """``x`` flattened to one axis."""
    return _t(x).reshape(-1)


def fliplr(x):
    """``x`` reversed along axis 1."""
    return torch.fliplr(_t(x))


def flipud(x):
    """``x`` reversed along axis 0."""
    return torch.flipud(_t(x))


def rot90(array, k=1, axes=(0, 1)):
    """``array`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first toward the second)."""
    array = _t(array)
    if array.ndim < 2:
        raise ValueError(f"rot90: the array needs at least 2 dimensions; received array.ndim={array.ndim}.")
    return torch.rot90(array, k, list(axes))


def hstack(xs):
    """Tensors concatenated along axis 1 (axis 0 for 1-D ones)."""
    return torch.hstack([_t(x) for x in xs])


def vstack(xs):
    """Tensors concatenated along axis 0 (1-D ones as rows)."""
    return torch.vstack([_t(x) for x in xs])


def dstack(xs):
    """Tensors concatenated along axis 2 (lower-dimensional ones expanded first)."""
    return torch.dstack([_t(x) for x in xs])


def _sections(indices_or_sections):
    if isinstance(indices_or_sections, int):
        return indices_or_sections
    return [int(i) for i in _t(indices_or_sections).reshape(-1).tolist()]


def array_split(x, indices_or_sections, axis=0):
    """``x`` split along ``axis`` into near-equal parts (or at the given indices); a list of tensors."""
    return list(torch.tensor_split(_t(x), _sections(indices_or_sections), dim=axis))


def hsplit(x, indices_or_sections):
    """``x`` split along axis 1 (axis 0 for 1-D ones) into equal parts or at indices."""
    return list(torch.hsplit(_t(x), _sections(indices_or_sections)))


def vsplit(x, indices_or_sections):
    """``x`` split along axis 0 into equal parts or at indices."""
    return list(torch.vsplit(_t(x), _sections(indices_or_sections)))


def dsplit(x, indices_or_sections):
    """``x`` split along axis 2 into equal parts or at indices."""
    return list(torch.dsplit(_t(x), _sections(indices_or_sections)))


# ---- differences, products, order statistics --------------------------------------------------------
def diff(a, n=1, axis=-1):
    """The ``n``-th discrete difference along ``axis``."""
    return torch.diff(_t(a), n=n, dim=axis)


def cumprod(x, axis=None, dtype=None):
    """Cumulative product along ``axis`` (None: of the flattened ``x``); bools give int32."""
    x = _t(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    out_dtype = x.dtype if dtype is None else standardize_dtype(dtype)
    if out_dtype == torch.bool:
        out_dtype = torch.int32
    return torch.cumprod(x, dim=axis, dtype=out_dtype)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule (sample points ``x``, or spacing ``dx``)."""
    y = _t(y)
    if y.dtype == torch.bool:
        y = _float(y)
    if x is not None:
        return torch.trapezoid(y, _t(x), dim=axis)
    return torch.trapezoid(y, dx=dx, dim=axis)


# ---- search -----------------------------------------------------------------------------------------
def nonzero(x):
    """The indices of the non-zero elements, one int32 row per axis (Keras's layout, numpy's as a stack)."""
    return torch.nonzero(_t(x)).T.to(torch.int32)


def searchsorted(sorted_sequence, values, side="left"):
    """Where ``values`` would be inserted into the 1-D ``sorted_sequence`` to keep it sorted (int32)."""
    sorted_sequence, values = _t(sorted_sequence), _t(values)
    if sorted_sequence.ndim != 1:
        raise ValueError("searchsorted: `sorted_sequence` must be 1-D; received shape "
                         f"{tuple(sorted_sequence.shape)}. Use ops.vectorized_map over rows for N-D sequences.")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: `side` must be 'left' or 'right'; received {side!r}.")
    return torch.searchsorted(sorted_sequence, values, side=side, out_int32=True)


def digitize(x, bins):
    """The index of the bin each element of ``x`` falls in (bins[i-1] <= x < bins[i]; int32)."""
    x, bins = _t(x), _t(bins)
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    return torch.bucketize(x, bins, right=True).to(torch.int32)


def select(condlist, choicelist, default=0):
    """The element of the first ``choicelist`` entry whose condition holds, else ``default``."""
    out = _t(default)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = torch.where(_t(cond), _t(choice), out)
    return out


def unique(x, sorted=True, return_index=False, return_inverse=False, return_counts=False,  # noqa: A002
           axis=None, size=None, fill_value=None):
    """The unique elements of ``x`` (sorted), optionally with inverse indices and counts.

    ``size``/``fill_value`` (Keras's fixed-size output) and ``return_index`` are not supported here."""
    if return_index or size is not None:
        raise NotImplementedError("unique: md.keras supports `return_inverse` and `return_counts`, not "
                                  f"return_index={return_index!r} or size={size!r}; run with Keras 3 on "
                                  "multidev for those.")
    out = torch.unique(_t(x), sorted=sorted, return_inverse=return_inverse, return_counts=return_counts, dim=axis)
    return out if isinstance(out, torch.Tensor) else tuple(out)


# ---- products ---------------------------------------------------------------------------------------
def vdot(x1, x2):
    """The dot product of the flattened inputs."""
    a, b = _t(x1), _t(x2)
    dtype = torch.result_type(a, b)
    return torch.dot(a.reshape(-1).to(dtype), b.reshape(-1).to(dtype))


def inner(x1, x2):
    """The sum of products over the last axes (numpy's ``inner``)."""
    a, b = _t(x1), _t(x2)
    dtype = torch.result_type(a, b)
    return torch.inner(a.to(dtype), b.to(dtype))


def kron(x1, x2):
    """The Kronecker product."""
    return torch.kron(_t(x1), _t(x2))


# ---- creation ---------------------------------------------------------------------------------------
def tri(N, M=None, k=0, dtype=None):
    """An N x M matrix with ones at and below the k-th diagonal (floatx unless ``dtype``)."""
    return torch.ones(N, N if M is None else M, dtype=_dtype_or_floatx(dtype)).tril(k)


def empty(shape, dtype=None):
    """An uninitialised tensor (floatx unless ``dtype``); its values are arbitrary."""
    return torch.empty(_shape(shape), dtype=_dtype_or_floatx(dtype))


def empty_like(x, dtype=None):
    """An uninitialised tensor shaped like ``x`` (its dtype unless ``dtype``)."""
    return torch.empty_like(_t(x), dtype=None if dtype is None else standardize_dtype(dtype))


