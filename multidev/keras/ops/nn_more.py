"""More of ``keras.ops.nn`` on torch: functional normalizations, ``dot_product_attention`` (Keras's
``(batch, length, heads, head_dim)`` layout), segment reductions, ``sparsemax``, ``psnr`` and the
depth/space rearrangements (TensorFlow's channel order for channels_last, as Keras 3).

Defaults are Keras 3's: ``layer_normalization``/``rms_normalization`` epsilon ``backend.epsilon()``
(1e-7, not torch's 1e-5), ``batch_normalization`` epsilon 1e-3, attention scale 1/sqrt(head_dim).

Example:
    out = ops.dot_product_attention(q, k, v, is_causal=True)      # q: (B, T, N, H)
    y = ops.layer_normalization(x, gamma, beta)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from multidev.keras import backend
from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor


def _axes(x, axis):
    return sorted(a % x.ndim for a in (axis if isinstance(axis, (list, tuple)) else (axis,)))


def _along(v, x, axes):
    """``v`` (shaped like ``x``'s ``axes``) broadcastable against ``x``."""
    v = _t(v).to(x.dtype)
    if v.ndim == x.ndim or axes == [x.ndim - 1]:
        return v
    return v.reshape([x.shape[d] if d in axes else 1 for d in range(x.ndim)])


def batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
    """(x - mean) / sqrt(variance + epsilon) * scale + offset, the statistics given along ``axis``."""
    x = _float(x)
    axes = [axis % x.ndim]
    out = (x - _along(mean, x, axes)) * torch.rsqrt(_along(variance, x, axes) + epsilon)
    if scale is not None:
        out = out * _along(scale, x, axes)
    return out if offset is None else out + _along(offset, x, axes)


def layer_normalization(x, gamma=None, beta=None, axis=-1, epsilon=None, **kwargs):
    """x normalized over ``axis`` (mean 0, variance 1), then * gamma + beta; ``rms_scaling=True`` divides by
    the root of the variance without centring, as Keras 3's keyword does."""
    x = _float(x)
    eps = backend.epsilon() if epsilon is None else epsilon
    axes = _axes(x, axis)
    var, mean = torch.var_mean(x, dim=axes, keepdim=True, correction=0)
    out = x * torch.rsqrt(var + eps) if kwargs.get("rms_scaling") else (x - mean) * torch.rsqrt(var + eps)
    if gamma is not None:
        out = out * _along(gamma, x, axes)
    if beta is not None and not kwargs.get("rms_scaling"):
        out = out + _along(beta, x, axes)
    return out


def rms_normalization(x, scale=None, axis=-1, epsilon=None):
    """x / sqrt(mean(x**2 over ``axis``) + epsilon) * scale."""
    x = _float(x)
    eps = backend.epsilon() if epsilon is None else epsilon
    axes = _axes(x, axis)
    out = x * torch.rsqrt(torch.mean(x * x, dim=axes, keepdim=True) + eps)
    return out if scale is None else out * _along(scale, x, axes)


def _expand_heads(k, heads):
    """Grouped-query attention: each of ``k``'s heads serves ``heads // k_heads`` consecutive query heads."""
    if k.shape[-2] == heads:
        return k
    if heads % k.shape[-2]:
        raise ValueError(f"dot_product_attention: {heads} query heads cannot share {k.shape[-2]} key/value heads.")
    return k.repeat_interleave(heads // k.shape[-2], dim=-2)


def dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                          flash_attention=None, attn_logits_soft_cap=None):
    """softmax(q k^T * scale + bias, masked) v over inputs shaped (batch, length, heads, head_dim)
    (or without the batch axis); ``mask`` is True where attention is allowed, broadcast to (B, N, T, S)."""
    q, k, v = _float(query), _float(key), _float(value)
    k, v = _expand_heads(k, q.shape[-2]), _expand_heads(v, q.shape[-2])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = torch.einsum("...tnh,...snh->...nts", q, k) * scale
    if bias is not None:
        logits = logits + _t(bias).to(logits.dtype)
    if attn_logits_soft_cap is not None:
        logits = torch.tanh(logits / attn_logits_soft_cap) * attn_logits_soft_cap
    allowed = None if mask is None else _t(mask).bool()
    if is_causal:
        causal = torch.ones(q.shape[-3], k.shape[-3], dtype=torch.bool, device=q.device).tril()
        allowed = causal if allowed is None else allowed & causal
    if allowed is not None:
        logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    return torch.einsum("...nts,...snh->...tnh", torch.softmax(logits, dim=-1), v)


def _segment(reduce, fill, data, segment_ids, num_segments):
    data, ids = _t(data), _t(segment_ids).long()
    count = int(ids.max()) + 1 if num_segments is None else num_segments
    out = torch.full((count,) + tuple(data.shape[1:]), fill, dtype=data.dtype, device=data.device)
    index = ids.reshape((-1,) + (1,) * (data.ndim - 1)).expand_as(data)
    return out.scatter_reduce(0, index, data, reduce=reduce)


def segment_min(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002 - Keras's name
    """Minima of ``data``'s rows grouped by ``segment_ids`` (empty segments: +inf, or the dtype's max)."""
    dtype = _t(data).dtype
    fill = math.inf if dtype.is_floating_point else torch.iinfo(dtype).max
    return _segment("amin", fill, data, segment_ids, num_segments)


def segment_prod(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002 - Keras's name
    """Products of ``data``'s rows grouped by ``segment_ids`` (empty segments: 1)."""
    return _segment("prod", 1, data, segment_ids, num_segments)


def sparsemax(x, axis=-1):
    """The Euclidean projection of ``x`` onto the simplex along ``axis`` (a sparse softmax)."""
    x = _float(x)
    z = x.movedim(axis, -1)
    ranked = torch.sort(z, dim=-1, descending=True).values
    r = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    cums = ranked.cumsum(-1)
    support = (1 + r * ranked) > cums
    k = support.sum(-1, keepdim=True)
    tau = (cums.gather(-1, k - 1) - 1) / k.to(z.dtype)
    return torch.clamp(z - tau, min=0).movedim(-1, axis)


def psnr(x1, x2, max_val):
    """Peak signal-to-noise ratio 20 log10(max_val) - 10 log10(mean((x1 - x2)**2)) over all elements."""
    a, b = _float(x1), _float(x2)
    if a.shape != b.shape:
        raise ValueError(f"psnr: inputs must have one shape; received {tuple(a.shape)} and {tuple(b.shape)}.")
    mse = torch.mean((a - b) ** 2)
    return 20 * torch.log10(torch.as_tensor(max_val, dtype=a.dtype)) - 10 * torch.log10(mse)


def _check_format(data_format, name):
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"{name}: data_format must be 'channels_last' or 'channels_first'; "
                         f"received {data_format!r}.")


def depth_to_space(x, block_size, data_format="channels_last"):
    """Channels moved into block_size x block_size spatial blocks (TensorFlow's order for channels_last)."""
    x = _t(x)
    _check_format(data_format, "depth_to_space")
    if data_format == "channels_first":
        return F.pixel_shuffle(x, block_size)
    n, h, w, c = x.shape
    out = x.reshape(n, h, w, block_size, block_size, c // block_size**2).permute(0, 1, 3, 2, 4, 5)
    return out.reshape(n, h * block_size, w * block_size, c // block_size**2)


def space_to_depth(x, block_size, data_format="channels_last"):
    """block_size x block_size spatial blocks moved into channels (the inverse of ``depth_to_space``)."""
    x = _t(x)
    _check_format(data_format, "space_to_depth")
    if data_format == "channels_first":
        return F.pixel_unshuffle(x, block_size)
    n, h, w, c = x.shape
    out = x.reshape(n, h // block_size, block_size, w // block_size, block_size, c).permute(0, 1, 3, 2, 4, 5)
    return out.reshape(n, h // block_size, w // block_size, c * block_size**2)
