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


def _groups(side: str, pattern: str) -> list:
    """``"b (h w) c"`` as [["b"], ["h", "w"], ["c"]]."""
    groups, current = [], None
    for token in side.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            if current is not None:
                raise ValueError(f"rearrange: nested parentheses in {pattern!r}.")
            current = []
        elif token == ")":
            if current is None:
                raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}.")
            groups.append(current)
            current = None
        elif not token.isidentifier():
            raise ValueError(f"rearrange: axis names must be identifiers (no '...' or numbers); received "
                             f"{token!r} in {pattern!r}.")
        elif current is not None:
            current.append(token)
        else:
            groups.append([token])
    if current is not None:
        raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}.")
    return groups


def _sizes(groups, shape, lengths, pattern) -> dict:
    """Each input axis name's size: given in ``lengths`` or inferred (one unknown per group)."""
    if len(groups) != len(shape):
        raise ValueError(f"rearrange: {pattern!r} names {len(groups)} input axes; the tensor has shape {tuple(shape)}.")
    sizes = {}
    for group, dim in zip(groups, shape):
        unknown = [n for n in group if n not in lengths]
        known = 1
        for n in group:
            known *= lengths.get(n, 1)
        if len(unknown) > 1 or (not unknown and known != dim) or (unknown and dim % known):
            raise ValueError(f"rearrange: cannot split an axis of size {dim} into {group} with {lengths}.")
        sizes.update({n: lengths[n] for n in group if n in lengths})
        sizes.update({n: dim // known for n in unknown})
    return sizes


def rearrange(tensor, pattern, **axes_lengths):
    """einops' ``rearrange`` (Keras 3's subset: named axes and parenthesised groups, no ``...``):
    ``rearrange(x, "b (h w) c -> b h w c", h=4)``."""
    x = _t(tensor)
    if pattern.count("->") != 1:
        raise ValueError(f"rearrange: the pattern needs one '->'; received {pattern!r}.")
    left, right = (_groups(side, pattern) for side in pattern.split("->"))
    names_in = [n for g in left for n in g]
    names_out = [n for g in right for n in g]
    if sorted(names_in) != sorted(names_out) or len(set(names_in)) != len(names_in):
        raise ValueError(f"rearrange: both sides must name the same axes once each; received {pattern!r}.")
    sizes = _sizes(left, x.shape, axes_lengths, pattern)
    flat = x.reshape([sizes[n] for n in names_in]).permute([names_in.index(n) for n in names_out])
    out_shape = []
    for group in right:
        size = 1
        for n in group:
            size *= sizes[n]
        out_shape.append(size)
    return flat.reshape(out_shape)
