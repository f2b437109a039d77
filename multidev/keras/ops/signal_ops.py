"""``keras.ops``' sequence, patch and complex-view helpers on torch: ``extract_sequences``, ``correlate``,
``histogram``, ``fold``/``unfold`` (NCHW, as Keras 3 on torch), ``polar``, ``view_as_complex``/``view_as_real``,
``view``, ``scatter_update`` and ``argpartition``.

Example:
    frames = ops.extract_sequences(audio, sequence_length=400, sequence_stride=160)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.ops.core import convert_to_tensor, standardize_dtype
from multidev.keras.ops.math_more import _to_float
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def extract_sequences(x, sequence_length, sequence_stride):
    """Frames of ``sequence_length`` every ``sequence_stride`` along the last axis: (..., frames, length)."""
    return _t(x).unfold(-1, sequence_length, sequence_stride)


def correlate(x1, x2, mode="valid"):
    """numpy's cross-correlation of two 1-D tensors (``mode`` 'valid', 'same' or 'full'; floats)."""
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"correlate: `mode` must be 'valid', 'same' or 'full'; received {mode!r}.")
    a, b = _t(x1), _t(x2)
    dtype = torch.result_type(a, b)
    a, b = _to_float(a.to(dtype)), _to_float(b.to(dtype))
    n, m = a.shape[-1], b.shape[-1]
    full = F.conv1d(F.pad(a.reshape(1, 1, -1), (m - 1, m - 1)), b.reshape(1, 1, -1)).reshape(-1)
    short, long = min(n, m), max(n, m)
    centre = (short - 1) // 2 if n >= m else short // 2   # numpy's centring of 'same'
    start = short - 1 if mode == "valid" else centre if mode == "same" else 0
    size = long - short + 1 if mode == "valid" else long if mode == "same" else n + m - 1
    return full[start:start + size]



def histogram(x, bins=10, range=None):  # noqa: A002 - Keras's name
    """(counts, bin_edges) of the values of ``x`` in ``bins`` equal bins over ``range`` (min..max by default)."""
    x = _float(x)
    return tuple(torch.histogram(x.reshape(-1), bins=bins, range=range))


def unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding kernel_size blocks of an NCHW image batch: (N, C * kH * kW, blocks), as ``torch.nn.Unfold``."""
    return F.unfold(_t(x), kernel_size, dilation=dilation, padding=padding, stride=stride)


def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Blocks (N, C * kH * kW, blocks) summed back into an NCHW image (the adjoint of ``unfold``)."""
    return F.fold(_t(x), output_size, kernel_size, dilation=dilation, padding=padding, stride=stride)


def polar(abs_, angle):
    """The complex numbers abs_ * exp(i * angle)."""
    a, b = _float(abs_), _float(angle)
    return torch.polar(a, b.to(a.dtype))


def view_as_complex(x):
    """A (..., 2) real tensor read as complex numbers."""
    return torch.view_as_complex(_float(x).contiguous())


def view_as_real(x):
    """A complex tensor as (..., 2) real and imaginary parts."""
    return torch.view_as_real(_t(x))


def view(x, dtype=None):
    """The bits of ``x`` reinterpreted as ``dtype``."""
    x = _t(x)
    return x if dtype is None else x.view(standardize_dtype(dtype))


def scatter_update(inputs, indices, updates, reduction=None):
    """A copy of ``inputs`` with the slices at ``indices`` (one index tuple per row) set to ``updates``
    (``reduction``: None, 'add', 'max', 'min' or 'mul')."""
    inputs = _t(inputs)
    index = tuple(_t(indices).long().T)
    updates = _t(updates).to(inputs.dtype)
    out = inputs.clone()
    if reduction is None:
        out[index] = updates
    elif reduction == "add":
        out.index_put_(index, updates, accumulate=True)
    elif reduction in ("max", "min", "mul"):
        reduce = {"max": torch.maximum, "min": torch.minimum, "mul": torch.mul}[reduction]
        for i in range(len(index[0])):
            at = tuple(part[i] for part in index)
            out[at] = reduce(out[at], updates[i])
    else:
        raise ValueError(f"scatter_update: `reduction` must be None, 'add', 'max', 'min' or 'mul'; "
                         f"received {reduction!r}.")
    return out


def argpartition(x, kth, axis=-1):
    """Indices that partition ``x`` along ``axis`` around its ``kth`` smallest element (int32; a stable
    argsort, which is one valid partition)."""
    x = _t(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    return torch.argsort(x, dim=axis, stable=True).to(torch.int32)
