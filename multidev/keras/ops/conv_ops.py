"""``keras.ops.nn``' functional convolutions and pooling on torch, in Keras 3's layouts: inputs
channels-last by default (``data_format="channels_first"`` for torch's), kernels ``(*kernel, in, out)``
(depthwise ``(*kernel, in, multiplier)``, transposed ``(*kernel, out, in)``), 1-3 spatial dims, and
TensorFlow's ``"same"`` padding (the odd extra row or column at the end).

Example:
    y = ops.conv(images, kernel, strides=2, padding="same")     # images (B, H, W, C), kernel (3, 3, C, F)
    z = ops.max_pool(y, 2)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.ops.core import convert_to_tensor
from multidev.keras.ops.numpy import _float

_t = convert_to_tensor
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _ints(value, rank, what):
    value = (value,) * rank if isinstance(value, int) else tuple(int(v) for v in value)
    if len(value) != rank or any(v < 1 for v in value):
        raise ValueError(f"`{what}` must be a positive int or {rank} positive ints; received {value!r}.")
    return value


def _channels_first(x, data_format, name):
    """``x`` as (batch, channels, *spatial), and the function that restores the caller's layout."""
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"{name}: data_format must be 'channels_last' or 'channels_first'; received {data_format!r}.")
    if x.ndim < 3 or x.ndim > 5:
        raise ValueError(f"{name}: inputs need 1 to 3 spatial dims (rank 3 to 5); received shape {tuple(x.shape)}.")
    if data_format == "channels_first":
        return x, lambda y: y
    return x.movedim(-1, 1), lambda y: y.movedim(1, -1)


def _padding(padding, name):
    padding = padding.lower() if isinstance(padding, str) else padding
    if padding not in ("valid", "same"):
        raise ValueError(f"{name}: padding must be 'valid' or 'same'; received {padding!r}.")
    return padding


def _same_pads(x, kernel, strides, dilation):
    """F.pad's list for TensorFlow's SAME: output ceil(size / stride), the odd extra at the end."""
    pads = []
    for i in reversed(range(len(kernel))):
        size, eff = x.shape[2 + i], (kernel[i] - 1) * dilation[i] + 1
        total = max((-(-size // strides[i]) - 1) * strides[i] + eff - size, 0)
        pads += [total // 2, total - total // 2]
    return pads


def _conv(x, weight, strides, padding, dilation, groups):
    rank = x.ndim - 2
    strides, dilation = _ints(strides, rank, "strides"), _ints(dilation, rank, "dilation_rate")
    if padding == "same":
        x = F.pad(x, _same_pads(x, weight.shape[2:], strides, dilation))
    return _CONV[rank](x, weight, None, strides, 0, dilation, groups)


def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """N-d convolution; ``kernel`` (*kernel_size, in_channels / groups, filters) (groups inferred)."""
    x, back = _channels_first(_float(inputs), data_format, "conv")
    kernel = _t(kernel).to(x.dtype)
    weight = kernel.permute(-1, -2, *range(kernel.ndim - 2))
    groups = x.shape[1] // kernel.shape[-2]
    return back(_conv(x, weight, strides, _padding(padding, "conv"), dilation_rate, groups))


def depthwise_conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Each channel convolved with its own ``multiplier`` filters; ``kernel`` (*kernel_size, in, multiplier)."""
    x, back = _channels_first(_float(inputs), data_format, "depthwise_conv")
    kernel = _t(kernel).to(x.dtype)
    channels, mult = kernel.shape[-2], kernel.shape[-1]
    weight = kernel.permute(-2, -1, *range(kernel.ndim - 2)).reshape(channels * mult, 1, *kernel.shape[:-2])
    return back(_conv(x, weight, strides, _padding(padding, "depthwise_conv"), dilation_rate, channels))


def separable_conv(inputs, depthwise_kernel, pointwise_kernel, strides=1, padding="valid", data_format=None,
                   dilation_rate=1):
    """A depthwise convolution followed by a 1x1 (pointwise) convolution."""
    depth = depthwise_conv(inputs, depthwise_kernel, strides, padding, data_format, dilation_rate)
    return conv(depth, pointwise_kernel, 1, "valid", data_format, 1)


def conv_transpose(inputs, kernel, strides=1, padding="valid", output_padding=None, data_format=None,
                   dilation_rate=1):
    """The transpose (gradient) of ``conv``; ``kernel`` (*kernel_size, filters, in_channels); output lengths
    as Keras's ``deconv_output_length`` (``same``: length * stride unless ``output_padding``)."""
    x, back = _channels_first(_float(inputs), data_format, "conv_transpose")
    rank = x.ndim - 2
    padding = _padding(padding, "conv_transpose")
    strides, dilation = _ints(strides, rank, "strides"), _ints(dilation_rate, rank, "dilation_rate")
    extra = (None,) * rank if output_padding is None else (
        (output_padding,) * rank if isinstance(output_padding, int) else tuple(output_padding))
    kernel = _t(kernel).to(x.dtype)
    weight = kernel.permute(-1, -2, *range(kernel.ndim - 2))
    full = _CONV_T[rank](x, weight, None, strides, 0, 0, 1, dilation)
    for i in range(rank):
        full = _crop(full, 2 + i, x.shape[2 + i], (kernel.shape[i] - 1) * dilation[i] + 1, strides[i], padding, extra[i])
    return back(full)


def _crop(full, dim, length, eff, stride, padding, extra):
    """``full`` (the unpadded transpose) cut or zero-extended along ``dim`` to Keras's output length."""
    if extra is None:
        target = length * stride if padding == "same" else (length - 1) * stride + eff
    else:
        target = (length - 1) * stride + eff - 2 * (eff // 2 if padding == "same" else 0) + extra
    start = max((length - 1) * stride + eff - target, 0) // 2   # the forward conv's SAME pad before (TF's)
    out = full.narrow(dim, start, min(target, full.shape[dim] - start))
    if out.shape[dim] < target:
        shape = list(out.shape)
        shape[dim] = target - out.shape[dim]
        out = torch.cat([out, out.new_zeros(shape)], dim)
    return out


def _pool(kind, inputs, pool_size, strides, padding, data_format, name):
    x, back = _channels_first(_float(inputs), data_format, name)
    rank = x.ndim - 2
    pool = _ints(pool_size, rank, "pool_size")
    strides = pool if strides is None else _ints(strides, rank, "strides")
    pads = _same_pads(x, pool, strides, (1,) * rank) if _padding(padding, name) == "same" else [0] * (2 * rank)
    if kind == "max":
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[rank - 1]
        return back(fn(F.pad(x, pads, value=float("-inf")), pool, strides))
    fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[rank - 1]
    total = fn(F.pad(x, pads), pool, strides)
    count = fn(F.pad(x.new_ones((1, 1) + tuple(x.shape[2:])), pads), pool, strides)   # windows' real elements
    return back(total / count)


def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """Max over ``pool_size`` windows (strides default to pool_size)."""
    return _pool("max", inputs, pool_size, strides, padding, data_format, "max_pool")


def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """Average over ``pool_size`` windows; with ``same`` padding over each window's real elements, as Keras."""
    return _pool("avg", inputs, pool_size, strides, padding, data_format, "average_pool")


def adaptive_average_pool(inputs, output_size, data_format=None):
    """Average pooling to a fixed ``output_size`` (torch's adaptive windows)."""
    x, back = _channels_first(_float(inputs), data_format, "adaptive_average_pool")
    fn = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[x.ndim - 3]
    return back(fn(x, output_size))


def adaptive_max_pool(inputs, output_size, data_format=None):
    """Max pooling to a fixed ``output_size`` (torch's adaptive windows)."""
    x, back = _channels_first(_float(inputs), data_format, "adaptive_max_pool")
    fn = (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)[x.ndim - 3]
    return back(fn(x, output_size))
