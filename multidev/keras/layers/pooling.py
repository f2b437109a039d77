"""Pooling layers, channels-last: Max/Average pooling 1D/2D and global pooling.

Example:
    pool = md.keras.layers.MaxPool1D()          # pool_size 2, strides = pool_size
    y = pool(torch.zeros(8, 296, 64))           # -> (8, 148, 64)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.conv import _tuple as conv_tuple


def _tuple(value, rank, what="pool_size"):
    """``value`` (an int or ``rank`` positive ints) as a tuple: ``MaxPooling2D(0)`` fails where it is written."""
    return conv_tuple(value, rank, what)


def _max_pool3d_tf_ties(x, pool_size, strides):
    """3-D max pooling whose gradient is TF's MaxPool3DGrad: every element equal to its window's maximum
    gets the window's whole gradient (torch's, like TF's 1-D/2-D pooling, gives it to the first only).
    Built on the windows (``unfold``): memory ``prod(pool_size)`` times the input's."""
    windows = x
    for dim, (k, s) in enumerate(zip(pool_size, strides)):
        windows = windows.unfold(2 + dim, k, s)
    windows = windows.flatten(-3)
    top = windows.detach().amax(-1, keepdim=True)
    picked = torch.where(windows.detach() == top, windows - windows.detach(), torch.zeros_like(windows))
    return top.squeeze(-1) + picked.sum(-1)


class _Pooling(Layer):
    """Shared local pooling; ``kind`` is 'max' or 'avg'."""

    rank, kind = 1, "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        padding = padding.lower() if isinstance(padding, str) else padding   # "VALID" as Keras 3 takes it
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding {padding!r}. Valid values: ['valid', 'same'].")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.pool_size = _tuple(pool_size, self.rank)
        self.strides = _tuple(strides, self.rank, "strides") if strides is not None else self.pool_size
        self.padding = padding
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def call(self, inputs):
        x = inputs.movedim(-1, 1)
        if self.padding == "same":
            x = self._pad_same(x)
        if self.kind == "max" and self.rank == 3:
            out = _max_pool3d_tf_ties(x, self.pool_size, self.strides)
        elif self.kind == "max":
            fn = (F.max_pool1d, F.max_pool2d)[self.rank - 1]
            out = fn(x, self.pool_size, self.strides)
        else:
            fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[self.rank - 1]
            out = fn(x, self.pool_size, self.strides) if self.padding == "valid" else self._avg_same(x, fn)
        return out.movedim(1, -1)

    def _pads(self, x):
        pads = []
        for i in reversed(range(self.rank)):
            size = x.shape[2 + i]
            out = -(-size // self.strides[i])
            total = max((out - 1) * self.strides[i] + self.pool_size[i] - size, 0)
            pads += [total // 2, total - total // 2]
        return pads

    def _pad_same(self, x):
        if self.kind == "max":
            return F.pad(x, self._pads(x), value=float("-inf"))
        return x

    def _avg_same(self, x, fn):
        # Keras averages only over the valid (unpadded) elements of each window.
        pads = self._pads(x)
        ones = x.new_ones((1, 1) + tuple(x.shape[2:]))
        total = fn(F.pad(x, pads), self.pool_size, self.strides)
        count = fn(F.pad(ones, pads), self.pool_size, self.strides)
        return total / count

    def get_config(self):
        return {**super().get_config(), "pool_size": list(self.pool_size), "strides": list(self.strides),
                "padding": self.padding}


class MaxPooling1D(_Pooling):
    """Max over windows of ``pool_size`` steps."""

    rank, kind = 1, "max"


class MaxPooling2D(_Pooling):
    """Max over (h, w) windows."""

    rank, kind = 2, "max"


class AveragePooling1D(_Pooling):
    """Average over windows of ``pool_size`` steps."""

    rank, kind = 1, "avg"


class AveragePooling2D(_Pooling):
    """Average over (h, w) windows."""

    rank, kind = 2, "avg"


class MaxPooling3D(_Pooling):
    """Max over (d, h, w) windows."""

    rank, kind = 3, "max"


class AveragePooling3D(_Pooling):
    """Average over (d, h, w) windows."""

    rank, kind = 3, "avg"


class _GlobalPooling(Layer):
    """Reduce all spatial axes (1..-2) with mean or max; ``keepdims`` keeps them as size 1."""

    rank, kind = 1, "avg"

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):   # it would silently reduce the wrong axes
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.keepdims = keepdims
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def call(self, inputs):
        dims = tuple(range(1, 1 + self.rank))
        if self.kind == "avg":
            return inputs.mean(dim=dims, keepdim=self.keepdims)
        return inputs.amax(dim=dims, keepdim=self.keepdims)

    def get_config(self):
        return {**super().get_config(), "keepdims": self.keepdims}


class GlobalAveragePooling1D(_GlobalPooling):
    """Mean over the steps axis (over the unmasked steps when the input carries a Keras mask)."""

    rank, kind = 1, "avg"

    def call(self, inputs, mask=None):
        if mask is None:
            return super().call(inputs)
        weights = mask.to(inputs.dtype).unsqueeze(-1)
        total = (inputs * weights).sum(dim=1, keepdim=self.keepdims)
        return total / weights.sum(dim=1, keepdim=self.keepdims)


class GlobalAveragePooling2D(_GlobalPooling):
    """Mean over height and width."""

    rank, kind = 2, "avg"


class GlobalMaxPooling1D(_GlobalPooling):
    """Max over the steps axis."""

    rank, kind = 1, "max"


class GlobalMaxPooling2D(_GlobalPooling):
    """Max over height and width."""

    rank, kind = 2, "max"


class GlobalAveragePooling3D(_GlobalPooling):
    """Mean over depth, height and width."""

    rank, kind = 3, "avg"


class GlobalMaxPooling3D(_GlobalPooling):
    """Max over depth, height and width."""

    rank, kind = 3, "max"


MaxPool1D, MaxPool2D, MaxPool3D = MaxPooling1D, MaxPooling2D, MaxPooling3D
AvgPool1D, AvgPool2D, AvgPool3D = AveragePooling1D, AveragePooling2D, AveragePooling3D
GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D = GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D
