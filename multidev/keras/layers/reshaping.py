"""Keras 3's reshaping layers, channels-last: Permute, RepeatVector, ZeroPadding1D/2D, Cropping1D/2D,
UpSampling1D/2D. No weights; each computes what TF 2.21's tf.keras does (UpSampling2D 'bilinear' is
``tf.image.resize``'s half-pixel bilinear, the same as torch's ``align_corners=False``).

Example:
    x = md.keras.layers.ZeroPadding2D(1)(images)           # (B, H + 2, W + 2, C)
    y = md.keras.layers.UpSampling2D(2, interpolation="bilinear")(x)
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from multidev.keras.layers.base import Layer


def _channels_last(data_format):
    if data_format not in (None, "channels_last"):
        raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")


def _pair(value, what):
    """An int ``n`` -> (n, n); a pair of ints stays; anything else: ValueError naming ``what``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value), int(value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, numbers.Integral) for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"`{what}` should be an int or a tuple of 2 ints. Received: {what}={value!r}")


def _pairs2d(value, what):
    """Keras's 2-D padding/cropping forms: n, (h, w) or ((top, bottom), (left, right))."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, (tuple, list)) for v in value):
        return _pair(value[0], what), _pair(value[1], what)
    h, w = _pair(value, what)
    return (h, h), (w, w)


class Permute(Layer):
    """Permute the non-batch axes: ``dims`` is 1-indexed (``Permute((2, 1))`` swaps the two)."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"Invalid permutation argument `dims` for Permute Layer. The set of indices in "
                             f"`dims` must be consecutive and start from 1. Received dims={dims!r}")

    def call(self, inputs):
        return inputs.permute(0, *self.dims)

    def get_config(self):
        return {**super().get_config(), "dims": list(self.dims)}


class RepeatVector(Layer):
    """(batch, features) -> (batch, n, features)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"Expected an integer value for `n`, got {type(n)}.")
        self.n = int(n)

    def call(self, inputs):
        if inputs.ndim != 2:
            raise ValueError(f"RepeatVector expects a 2-D input (batch, features). Received shape: {tuple(inputs.shape)}")
        return inputs.unsqueeze(1).expand(-1, self.n, -1)

    def get_config(self):
        return {**super().get_config(), "n": self.n}


class ZeroPadding1D(Layer):
    """Zeros before and after the steps axis: ``padding`` n or (before, after)."""

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.padding = _pair(padding, "padding")

    def call(self, inputs):
        return F.pad(inputs, (0, 0, *self.padding))

    def get_config(self):
        return {**super().get_config(), "padding": list(self.padding)}


class ZeroPadding2D(Layer):
    """Zeros around height and width: n, (h, w) or ((top, bottom), (left, right))."""

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.padding = _pairs2d(padding, "padding")

    def call(self, inputs):
        (top, bottom), (left, right) = self.padding
        return F.pad(inputs, (0, 0, left, right, top, bottom))

    def get_config(self):
        return {**super().get_config(), "padding": [list(p) for p in self.padding]}


class Cropping1D(Layer):
    """Drop steps at the start and end: ``cropping`` n or (start, end)."""

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = _pair(cropping, "cropping")

    def call(self, inputs):
        start, end = self.cropping
        return inputs[:, start:inputs.shape[1] - end]

    def get_config(self):
        return {**super().get_config(), "cropping": list(self.cropping)}


class Cropping2D(Layer):
    """Drop rows/columns: n, (h, w) or ((top, bottom), (left, right))."""

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.cropping = _pairs2d(cropping, "cropping")

    def call(self, inputs):
        (top, bottom), (left, right) = self.cropping
        return inputs[:, top:inputs.shape[1] - bottom, left:inputs.shape[2] - right]

    def get_config(self):
        return {**super().get_config(), "cropping": [list(c) for c in self.cropping]}


class UpSampling1D(Layer):
    """Repeat each step ``size`` times."""

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        self.size = int(size)

    def call(self, inputs):
        return torch.repeat_interleave(inputs, self.size, dim=1)

    def get_config(self):
        return {**super().get_config(), "size": self.size}


class UpSampling2D(Layer):
    """Scale height and width by ``size``: 'nearest' repeats rows/columns, 'bilinear' interpolates with
    TF's half-pixel centers."""

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        _channels_last(data_format)
        if interpolation not in ("nearest", "bilinear"):
            raise NotImplementedError(
                f"UpSampling2D(interpolation={interpolation!r}) is not implemented in md.keras ('nearest' and "
                "'bilinear' are): torch's bicubic kernel differs from TF's, the outputs would silently differ.")
        self.size, self.interpolation = _pair(size, "size"), interpolation

    def call(self, inputs):
        if self.interpolation == "nearest":
            return inputs.repeat_interleave(self.size[0], dim=1).repeat_interleave(self.size[1], dim=2)
        x = inputs.movedim(-1, 1)
        out = F.interpolate(x, size=(x.shape[2] * self.size[0], x.shape[3] * self.size[1]), mode="bilinear",
                            align_corners=False)
        return out.movedim(1, -1)

    def get_config(self):
        return {**super().get_config(), "size": list(self.size), "interpolation": self.interpolation}
