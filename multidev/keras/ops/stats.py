"""``keras.ops``' order statistics and NaN-ignoring reductions on torch: ``quantile``/``percentile``/``median``,
``ptp``, and the ``nan*`` family (numpy's: NaNs are skipped; an all-NaN slice gives NaN, -1 for ``nanarg*``).

Dtypes follow Keras 3: quantiles and the nan means/variances are floats (ints give float32), ``nansum`` of
bools gives int32, ``nanarg*`` int32; ``axis`` is None (all), an int or a tuple, as in ``ops.sum``.

Example:
    p95 = ops.percentile(latencies, 95.0)
    ops.nanmean(scores, axis=0)
"""

from __future__ import annotations

import torch

from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.numpy import _dims, _float, argmax, argmin, cumsum, prod
from multidev.keras.ops.arrays import cumprod

_t = convert_to_tensor


def _quantile(fn, x, q, axis, method, keepdims):
    """``fn`` (torch.quantile or nanquantile) over the axes in ``axis``, q's axes first as numpy."""
    x = _float(x)
    q = _t(q).to(x.dtype)
    dims = tuple(sorted(d % x.ndim for d in _dims(x, axis))) if x.ndim else ()
    rest = [d for d in range(x.ndim) if d not in dims]
    flat = x.permute(*rest, *dims).reshape(*[x.shape[d] for d in rest], -1)
    out = fn(flat, q, dim=-1, interpolation=method)
    if keepdims:
        kept = [1 if d in dims else x.shape[d] for d in range(x.ndim)]
        out = out.reshape(tuple(q.shape) + tuple(kept))
    return out


def quantile(x, q, axis=None, method="linear", keepdims=False):
    """The ``q``-th quantiles (q in [0, 1]) along ``axis``; ``method`` as numpy's."""
    return _quantile(torch.quantile, x, q, axis, method, keepdims)


def percentile(x, q, axis=None, method="linear", keepdims=False):
    """The ``q``-th percentiles (q in [0, 100]) along ``axis``."""
    return quantile(x, _float(q) / 100.0, axis, method, keepdims)


def median(x, axis=None, keepdims=False):
    """The median along ``axis`` (the mean of the two middle values for even counts, as numpy; floats)."""
    return quantile(x, 0.5, axis, keepdims=keepdims)


def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    """``quantile`` skipping NaNs."""
    return _quantile(torch.nanquantile, x, q, axis, method, keepdims)


def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    """``percentile`` skipping NaNs."""
    return nanquantile(x, _float(q) / 100.0, axis, method, keepdims)


def nanmedian(x, axis=None, keepdims=False):
    """``median`` skipping NaNs."""
    return nanquantile(x, 0.5, axis, keepdims=keepdims)


def ptp(x, axis=None, keepdims=False):
    """max - min along ``axis`` (peak to peak)."""
    x = _t(x)
    dims = _dims(x, axis)
    return torch.amax(x, dim=dims, keepdim=keepdims) - torch.amin(x, dim=dims, keepdim=keepdims)


def _nan_filled(x, value):
    x = _t(x)
    return torch.where(torch.isnan(x), torch.full((), value, dtype=x.dtype), x) if x.is_floating_point() else x


def nansum(x, axis=None, keepdims=False):
    """Sum skipping NaNs (bools and small ints give int32)."""
    x = _t(x)
    out_dtype = torch.int32 if x.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16) else x.dtype
    return torch.sum(_nan_filled(x, 0.0), dim=_dims(x, axis), keepdim=keepdims).to(out_dtype)


def nanprod(x, axis=None, keepdims=False):
    """Product skipping NaNs."""
    return prod(_nan_filled(x, 1.0), axis=axis, keepdims=keepdims)


def nanmean(x, axis=None, keepdims=False):
    """Mean skipping NaNs (floats)."""
    x = _float(x)
    return torch.nanmean(x, dim=_dims(x, axis), keepdim=keepdims)


def nanvar(x, axis=None, keepdims=False):
    """Population variance skipping NaNs (floats)."""
    x = _float(x)
    dims = _dims(x, axis)
    valid = ~torch.isnan(x)
    centered = torch.where(valid, x - torch.nanmean(x, dim=dims, keepdim=True), torch.zeros((), dtype=x.dtype))
    return centered.square().sum(dim=dims, keepdim=keepdims) / valid.sum(dim=dims, keepdim=keepdims)


def nanstd(x, axis=None, keepdims=False):
    """Population standard deviation skipping NaNs (floats)."""
    return torch.sqrt(nanvar(x, axis, keepdims))


def _nan_extreme(reduce, x, axis, keepdims, fill):
    x = _t(x)
    if not x.is_floating_point():
        return reduce(x, dim=_dims(x, axis), keepdim=keepdims)
    dims = _dims(x, axis)
    out = reduce(_nan_filled(x, fill), dim=dims, keepdim=keepdims)
    return torch.where(torch.isnan(x).all(dim=dims, keepdim=keepdims), torch.full((), float("nan"), dtype=x.dtype), out)


def nanmax(x, axis=None, keepdims=False):
    """Maximum skipping NaNs (NaN where a slice is all NaN)."""
    return _nan_extreme(torch.amax, x, axis, keepdims, float("-inf"))


def nanmin(x, axis=None, keepdims=False):
    """Minimum skipping NaNs (NaN where a slice is all NaN)."""
    return _nan_extreme(torch.amin, x, axis, keepdims, float("inf"))


def _nan_arg(arg, x, axis, keepdims, fill):
    x = _t(x)
    if not x.is_floating_point():
        return arg(x, axis=axis, keepdims=keepdims)
    out = arg(_nan_filled(x, fill), axis=axis, keepdims=keepdims)
    all_nan = torch.isnan(x).all() if axis is None else torch.isnan(x).all(dim=axis, keepdim=keepdims)
    return torch.where(all_nan, torch.full((), -1, dtype=out.dtype), out)


def nanargmax(x, axis=None, keepdims=False):
    """Index of the maximum skipping NaNs (int32; -1 where a slice is all NaN)."""
    return _nan_arg(argmax, x, axis, keepdims, float("-inf"))


def nanargmin(x, axis=None, keepdims=False):
    """Index of the minimum skipping NaNs (int32; -1 where a slice is all NaN)."""
    return _nan_arg(argmin, x, axis, keepdims, float("inf"))


def nancumsum(x, axis=None, dtype=None):
    """Running sum with NaNs counted as 0."""
    return cumsum(_nan_filled(x, 0.0), axis=axis, dtype=dtype)


def nancumprod(x, axis=None, dtype=None):
    """Running product with NaNs counted as 1."""
    return cumprod(_nan_filled(x, 1.0), axis=axis, dtype=dtype)
