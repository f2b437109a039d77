"""More of ``keras.ops.numpy`` on torch: NaN-aware extremes, membership, float bit ops, special functions,
creation (``identity``, ``diagflat``, ``vander``, ``logspace``, windows), counting and complex helpers.

Dtypes follow Keras 3 on its torch backend: ``i0``/``corrcoef`` give floats (int64: float64),
``bincount`` int32 without weights, windows floatx; Python scalars are weakly typed.

Example:
    counts = ops.bincount(labels, minlength=num_classes)
    win = ops.hanning(256)
"""

from __future__ import annotations

import torch

from multidev.keras import backend
from multidev.keras.ops.core import cast, convert_to_tensor, standardize_dtype
from multidev.keras.ops.elementwise import _tensors
from multidev.keras.ops.math_more import _to_float
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def _floatx():
    return backend.as_dtype(backend.floatx())


def array(x, dtype=None):
    """``x`` as a tensor (``convert_to_tensor``)."""
    return _t(x, dtype)


def get_item(x, key):
    """``x[key]``."""
    return _t(x)[key]


def saturate_cast(x, dtype):
    """``x`` cast to ``dtype`` with values clipped to its range first (no integer wrap-around)."""
    x, dtype = _t(x), standardize_dtype(dtype)
    if dtype != torch.bool and not dtype.is_floating_point and not dtype.is_complex:
        info = torch.iinfo(dtype)
        if x.is_floating_point():
            x = torch.clamp(x, info.min, info.max)
        elif x.dtype != torch.bool:
            x = torch.clamp(x.to(torch.int64), info.min, info.max)
    return cast(x, dtype)


def fmax(x1, x2):
    """Element-wise maximum that ignores NaNs (the other value wins)."""
    return torch.fmax(*_tensors(x1, x2))


def fmin(x1, x2):
    """Element-wise minimum that ignores NaNs (the other value wins)."""
    return torch.fmin(*_tensors(x1, x2))


def isin(x1, x2, assume_unique=False, invert=False):
    """Element-wise test of membership of ``x1``'s values in ``x2``."""
    a, b = _t(x1), _t(x2)
    if a.dtype == torch.bool or b.dtype == torch.bool:
        a, b = a.to(torch.int32), b.to(torch.int32)
    return torch.isin(a, b, assume_unique=assume_unique, invert=invert)


def ldexp(x1, x2):
    """x1 * 2**x2 for an integer ``x2``."""
    a, b = _t(x1), _t(x2)
    if b.is_floating_point() or b.is_complex() or b.dtype == torch.bool:
        raise TypeError(f"ldexp: the exponent must be an integer type; received x2 dtype={b.dtype}.")
    return torch.ldexp(_float(a), b)


def nextafter(x1, x2):
    """The next float after ``x1`` toward ``x2``."""
    a, b = _tensors(x1, x2)
    if not a.is_floating_point():
        a, b = a.to(_floatx()), b.to(_floatx())
    return torch.nextafter(a, b)


def i0(x):
    """The modified Bessel function of the first kind, order 0."""
    return torch.i0(_to_float(_t(x)))


def isreal(x):
    """Element-wise test of a zero imaginary part (True for real dtypes)."""
    return torch.isreal(_t(x))


def conjugate(x):
    """The complex conjugate (real tensors as they are)."""
    return torch.conj(_t(x)).resolve_conj()


def angle(x):
    """The argument of complex values (0 or pi for reals)."""
    return torch.angle(_float(x))


def identity(n, dtype=None):
    """The n x n identity matrix (floatx unless ``dtype``)."""
    return torch.eye(n, dtype=standardize_dtype(backend.floatx() if dtype is None else dtype))


def diagflat(x, k=0):
    """A matrix with the flattened ``x`` on its k-th diagonal."""
    return torch.diagflat(_t(x), offset=k)


def append(x1, x2, axis=None):
    """``x2`` appended to ``x1`` along ``axis`` (both flattened when None)."""
    a, b = _t(x1), _t(x2)
    if axis is None:
        return torch.cat((a.reshape(-1), b.reshape(-1)))
    return torch.cat((a, b), dim=axis)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-D ``x`` (decreasing powers unless ``increasing``)."""
    x = _t(x)
    return torch.vander(x, N=N, increasing=increasing).to(x.dtype)


def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of flat ``indices`` (a tuple, one tensor per axis)."""
    indices = _t(indices)
    return tuple(i.to(indices.dtype) for i in torch.unravel_index(indices, tuple(shape)))


def corrcoef(x):
    """Pearson correlation coefficients of the rows of ``x``."""
    return torch.corrcoef(_to_float(_t(x)))


def cdist(x1, x2):
    """Euclidean distances between the rows of ``x1`` and of ``x2`` (batched over leading axes)."""
    a, b = _float(x1), _float(x2)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise ValueError("cdist: inputs need rank >= 2 and the same last axis; received shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}.")
    return torch.sqrt(torch.sum((a.unsqueeze(-2) - b.unsqueeze(-3)) ** 2, dim=-1))


def bincount(x, weights=None, minlength=0, sparse=False):
    """Counts of each non-negative int in ``x`` (per row for 2-D ``x``); int32, or the weights' dtype."""
    if sparse:
        raise ValueError("bincount: md.keras has no sparse tensors; received sparse=True.")
    x = _t(x)
    w = None if weights is None else _t(weights)
    dtype = torch.int32 if w is None else torch.result_type(x, w)
    length = max(int(x.max()) + 1 if x.numel() else 0, minlength)
    rows = x.reshape(-1, x.shape[-1]) if x.ndim == 2 else x.reshape(1, -1)
    wrows = None if w is None else w.reshape(rows.shape)
    out = torch.stack([torch.bincount(r, None if wrows is None else wrows[i], minlength=length)
                       for i, r in enumerate(rows)])
    return (out if x.ndim == 2 else out[0]).to(dtype)


def _window(fn, doc):
    def op(x, *args):
        return fn(int(x), *args, dtype=_floatx())
    op.__doc__ = doc
    op.__module__ = __name__
    return op


bartlett = _window(torch.signal.windows.bartlett, "The symmetric Bartlett (triangular) window of length x.")
blackman = _window(torch.signal.windows.blackman, "The symmetric Blackman window of length x.")
hamming = _window(torch.signal.windows.hamming, "The symmetric Hamming window of length x.")
hanning = _window(torch.signal.windows.hann, "The symmetric Hann window of length x.")


def kaiser(x, beta):
    """The symmetric Kaiser window of length x with shape ``beta``."""
    return torch.signal.windows.kaiser(int(x), beta=float(beta), dtype=_floatx())


def logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    """``num`` values spaced evenly on a log scale from base**start to base**stop (scalar ends)."""
    if axis != 0:
        raise ValueError(f"logspace: md.keras supports axis=0 only; received axis={axis!r}.")
    count = num if endpoint else num + 1
    exps = torch.linspace(float(start), float(stop), count, dtype=torch.float64)[:num]
    return torch.pow(float(base), exps).to(standardize_dtype(backend.floatx() if dtype is None else dtype))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``num`` values spaced evenly on a log scale from ``start`` to ``stop`` (scalar ends, same sign)."""
    if axis != 0:
        raise ValueError(f"geomspace: md.keras supports axis=0 only; received axis={axis!r}.")
    if float(start) * float(stop) <= 0:
        raise ValueError(f"geomspace: start and stop must be non-zero and of one sign; received {start}, {stop}.")
    sign = -1.0 if float(start) < 0 else 1.0
    out = sign * logspace(torch.log10(torch.tensor(abs(float(start)), dtype=torch.float64)).item(),
                          torch.log10(torch.tensor(abs(float(stop)), dtype=torch.float64)).item(),
                          num, endpoint, 10, "float64")
    return out.to(standardize_dtype(backend.floatx() if dtype is None else dtype))
