"""Preprocessing layers the tutorials use: Rescaling, Normalization, RandomFlip, RandomRotation, RandomZoom,
RandomTranslation.

Example:
    norm = md.keras.layers.Normalization()
    norm.adapt(x_train)                       # per-feature mean and variance of the data
    model = md.keras.Sequential([md.keras.layers.Rescaling(1 / 255), norm, ...])
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from multidev.keras import backend, batch_draw
from multidev.keras.layers.base import Layer


class Rescaling(Layer):
    """``inputs * scale + offset`` (e.g. ``Rescaling(1 / 255)`` for images).

    Example:
        >>> md.keras.layers.Rescaling(1 / 255)(torch.tensor([0, 255], dtype=torch.uint8))
        tensor([0., 1.])
    """

    supports_masking = True

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.scale, self.offset = scale, offset

    def call(self, inputs):
        x = inputs if inputs.is_floating_point() else inputs.to(self._compute_torch_dtype)
        return x * self.scale + self.offset

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


def _as_tensor(data, steps=None) -> torch.Tensor:
    """An array, or the first ``steps`` batches of a Dataset/iterable (all of them when None), as one tensor."""
    if hasattr(data, "as_numpy_iterator") or hasattr(data, "__iter__") and not isinstance(data, (np.ndarray,
                                                                                                  torch.Tensor, list)):
        batches = []
        for i, b in enumerate(data):
            if steps is not None and i >= steps:
                break
            batches.append(b[0] if isinstance(b, (tuple, list)) else b)
        return torch.cat([torch.as_tensor(np.asarray(b)) for b in batches])
    return torch.as_tensor(np.asarray(data))


class Normalization(Layer):
    """``(inputs - mean) / sqrt(variance)`` per feature of ``axis`` (``invert=True`` undoes it).

    Give ``mean`` and ``variance`` (constants, as Keras 3's: no weights), or call ``adapt(data)``
    before training (non-trainable weights, saved with the model); the same on every replica.

    Example:
        >>> norm = md.keras.layers.Normalization()
        >>> norm.adapt(torch.tensor([[1.0], [3.0]]))
        >>> norm(torch.tensor([[3.0]]))
        tensor([[1.]])
    """

    supports_masking = True

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        if (mean is None) != (variance is None):
            raise ValueError(f"When setting values directly, both `mean` and `variance` must be set. Received: "
                             f"mean={mean!r} and variance={variance!r}")
        self.axis = (axis,) if isinstance(axis, int) else tuple(axis or ())
        self.invert = bool(invert)
        self._init_mean, self._init_variance = mean, variance

    def _stat_shape(self, input_shape):
        rank = len(input_shape)
        axes = [a % rank for a in self.axis]
        return tuple(input_shape[i] if i in axes else 1 for i in range(1, rank)), axes

    def build(self, input_shape):
        shape, _ = self._stat_shape(input_shape)
        self.add_weight("mean", shape, "zeros", trainable=False)
        self.add_weight("variance", shape, "ones", trainable=False)
        if self._init_mean is not None:   # every replica's copy under a strategy (backend.set_value)
            backend.set_value(self._registered_weight("mean"), torch.as_tensor(
                np.asarray(self._init_mean), dtype=torch.float32).expand(shape))
            backend.set_value(self._registered_weight("variance"), torch.as_tensor(
                np.asarray(self._init_variance), dtype=torch.float32).expand(shape))
            # Given statistics are constants in Keras 3, not weights: get_weights() is [] as TF's, so
            # set_weights(tf_layer.get_weights()) fits; they still follow the layer's device and replicas.
            self._weight_specs = [spec for spec in self._weight_specs if spec[0] not in ("mean", "variance")]

    def adapt(self, data, batch_size=None, steps=None):
        """Set mean and variance (biased, as Keras) from ``data`` (array, tensor or Dataset of batches;
        ``steps`` batches of it if given: Keras 3's Normalization takes no ``steps``, a repeated Dataset
        would never end)."""
        x = _as_tensor(data, steps).to(torch.float64)
        shape, axes = self._stat_shape(tuple(x.shape))
        if not self.built:
            self.build(tuple(x.shape))
            self.built = True
        reduce = tuple(i for i in range(x.dim()) if i not in axes)
        mean = x.mean(dim=reduce, keepdim=True)
        variance = ((x - mean) ** 2).mean(dim=reduce, keepdim=True)
        # Every replica's copy when the layer was built in a strategy's scope (backend.set_value).
        backend.set_value(self._registered_weight("mean"), mean.reshape(shape))
        backend.set_value(self._registered_weight("variance"), variance.reshape(shape))

    def call(self, inputs):
        x = inputs if inputs.is_floating_point() else inputs.to(self._compute_torch_dtype)
        std = torch.clamp(torch.sqrt(self.variance), min=1e-7).to(x.dtype)   # Keras: max(sqrt(var), epsilon)
        mean = self.mean.to(x.dtype)
        return x * std + mean if self.invert else (x - mean) / std

    def get_config(self):
        return {**super().get_config(), "axis": list(self.axis), "invert": self.invert,
                "mean": None if self._init_mean is None else np.asarray(self._init_mean).tolist(),
                "variance": None if self._init_variance is None else np.asarray(self._init_variance).tolist()}


def _generator(seed):
    return None if seed is None else torch.Generator().manual_seed(int(seed))


class RandomFlip(Layer):
    """While training, flip each image left-right and/or up-down with probability 1/2; identity otherwise.

    Example:
        >>> flip = md.keras.layers.RandomFlip("horizontal", seed=1)
        >>> flip(images, training=True)    # (batch, height, width, channels)
    """

    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode="horizontal_and_vertical", seed=None, **kwargs):
        super().__init__(**kwargs)
        if mode not in self._MODES:
            raise ValueError(f"RandomFlip layer {self.name} received an unknown mode argument {mode!r}. "
                             f"Valid: {list(self._MODES)}.")
        self.mode, self.seed = mode, seed
        self._rng = _generator(seed)

    def _flip(self, x, axis):
        coin = batch_draw.rows(lambda n: torch.rand(n, generator=self._rng), x.shape[0]) < 0.5   # one device's coins
        coin = coin.to(x.device).view(-1, *([1] * (x.dim() - 1)))
        return torch.where(coin, x.flip(axis), x)

    def call(self, inputs, training=False):
        if not training:
            return inputs
        x = inputs if inputs.dim() == 4 else inputs.unsqueeze(0)
        if self.mode in ("horizontal", "horizontal_and_vertical"):
            x = self._flip(x, 2)
        if self.mode in ("vertical", "horizontal_and_vertical"):
            x = self._flip(x, 1)
        return x if inputs.dim() == 4 else x[0]

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "seed": self.seed}


class _RandomAffine(Layer):
    """Base of the per-image affine augmentations: while training, ``_draws`` uniforms per image (one device's
    numbers on replicas: ``batch_draw.rows``) give each image's map ``_theta(u)``, sampled by ``grid_sample``
    (fill modes: torch's zeros, reflection and border padding; 'wrap' and a nonzero fill value are not there)."""

    _FILL = {"constant": "zeros", "reflect": "reflection", "nearest": "border"}
    _draws = 1

    def __init__(self, fill_mode, interpolation, seed, fill_value, **kwargs):
        super().__init__(**kwargs)
        if fill_mode not in self._FILL:
            raise ValueError(f"Unknown `fill_mode` {fill_mode!r}. Expected one of {sorted(self._FILL)}.")
        if interpolation not in ("bilinear", "nearest"):
            raise ValueError(f"Unknown `interpolation` {interpolation!r}. Expected 'bilinear' or 'nearest'.")
        if fill_mode == "constant" and fill_value:
            raise ValueError(f"fill_mode='constant' supports fill_value=0.0 only. Received: fill_value={fill_value!r}")
        self.fill_mode, self.interpolation, self.seed, self.fill_value = fill_mode, interpolation, seed, fill_value
        self._rng = _generator(seed)

    def _theta(self, u, inputs):
        """(images, 2, 3) maps from output to input coordinates in [-1, 1], from (images, _draws) uniforms."""
        raise NotImplementedError

    def call(self, inputs, training=False):
        if not training:
            return inputs
        n = inputs.shape[0] if inputs.dim() == 4 else 1
        u = batch_draw.rows(lambda k: torch.rand(k, self._draws, generator=self._rng, dtype=torch.float64), n)
        theta = self._theta(u, inputs).to(inputs.device)
        x = inputs if inputs.dim() == 4 else inputs.unsqueeze(0)
        images = x.movedim(-1, 1).to(torch.float32) if not x.is_floating_point() else x.movedim(-1, 1)
        grid = F.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
        out = F.grid_sample(images, grid, mode=self.interpolation, padding_mode=self._FILL[self.fill_mode],
                            align_corners=False).movedim(1, -1).to(x.dtype)
        return out if inputs.dim() == 4 else out[0]

    def get_config(self):
        return {**super().get_config(), "fill_mode": self.fill_mode, "interpolation": self.interpolation,
                "seed": self.seed, "fill_value": self.fill_value}


class RandomRotation(_RandomAffine):
    """While training, rotate each image by a random angle in ``factor * 2 * pi`` (channels-last images).

    ``factor`` is a fraction of a full turn: ``0.1`` draws from [-36, 36] degrees; ``(lo, hi)`` gives
    the range. ``fill_mode`` 'constant' (with ``fill_value``), 'reflect', 'nearest' or 'wrap' (torch's
    grid_sample padding: zeros, reflection, border; 'wrap' is not available); ``interpolation``
    'bilinear' or 'nearest'.

    Example:
        >>> rotate = md.keras.layers.RandomRotation(0.1, seed=1)
        >>> rotate(images, training=True)  # each image turned by up to 36 degrees
    """

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None, fill_value=0.0, **kwargs):
        lo, hi = (-factor, factor) if isinstance(factor, (int, float)) else tuple(factor)
        if lo > hi:
            raise ValueError(f"`factor` lower bound must not exceed the upper bound. Received: factor={factor!r}")
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        self.factor, self.lower, self.upper = factor, float(lo), float(hi)

    def _theta(self, u, inputs):
        angle = ((self.lower + (self.upper - self.lower) * u[:, 0]) * 2 * math.pi).to(inputs.dtype)
        cos, sin = torch.cos(angle), torch.sin(angle)
        zero = torch.zeros_like(cos)
        return torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


def _zoom_range(factor, what):
    lo, hi = (-factor, factor) if isinstance(factor, (int, float)) else tuple(factor)
    if lo > hi or lo < -1:
        raise ValueError(f"`{what}` must be a float or a (lower, upper) pair with -1 <= lower <= upper. "
                         f"Received: {what}={factor!r}")
    return float(lo), float(hi)


class RandomZoom(_RandomAffine):
    """While training, zoom each image by ``1 + factor``, ``factor`` drawn per image in ``height_factor``'s
    range (a positive factor zooms out, as Keras 3's); ``width_factor=None`` keeps the aspect ratio.

    Example:
        >>> zoom = md.keras.layers.RandomZoom(height_factor=0.2, width_factor=0.2, seed=1)
        >>> zoom(images, training=True)    # each image zoomed in or out by up to 20% per axis
    """

    _draws = 2

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, **kwargs):
        heights = _zoom_range(height_factor, "height_factor")
        widths = None if width_factor is None else _zoom_range(width_factor, "width_factor")
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        (self.height_lower, self.height_upper), self.width_range = heights, widths
        self.height_factor, self.width_factor = height_factor, width_factor

    def _theta(self, u, inputs):
        height = 1 + self.height_lower + (self.height_upper - self.height_lower) * u[:, 0]
        lower, upper = self.width_range or (self.height_lower, self.height_upper)
        width = height if self.width_range is None else 1 + lower + (upper - lower) * u[:, 1]
        zero = torch.zeros_like(height)
        return torch.stack([torch.stack([width, zero, zero], 1), torch.stack([zero, height, zero], 1)], 1)

    def get_config(self):
        return {**super().get_config(), "height_factor": self.height_factor, "width_factor": self.width_factor}


class RandomTranslation(_RandomAffine):
    """While training, shift each image by a fraction of its height and width drawn per image in
    ``height_factor``'s and ``width_factor``'s ranges (a positive factor shifts down / right, as Keras's).

    Example:
        >>> shift = md.keras.layers.RandomTranslation(height_factor=0.1, width_factor=0.1, seed=1)
        >>> shift(images, training=True)   # each image moved by up to 10% of its size on each axis
    """

    _draws = 2

    def __init__(self, height_factor, width_factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, **kwargs):
        heights = _translation_range(height_factor, "height_factor")
        widths = _translation_range(width_factor, "width_factor")
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        self.height_range, self.width_range = heights, widths
        self.height_factor, self.width_factor = height_factor, width_factor

    def _theta(self, u, inputs):
        # grid_sample's coordinates span 2 per image side: a shift by ``f`` of the side reads 2 * f back.
        (h_lo, h_hi), (w_lo, w_hi) = self.height_range, self.width_range
        dy = (h_lo + (h_hi - h_lo) * u[:, 0]).to(inputs.dtype)
        dx = (w_lo + (w_hi - w_lo) * u[:, 1]).to(inputs.dtype)
        one, zero = torch.ones_like(dy), torch.zeros_like(dy)
        return torch.stack([torch.stack([one, zero, -2 * dx], 1), torch.stack([zero, one, -2 * dy], 1)], 1)

    def get_config(self):
        return {**super().get_config(), "height_factor": self.height_factor, "width_factor": self.width_factor}


def _translation_range(factor, what):
    lo, hi = (-factor, factor) if isinstance(factor, (int, float)) else tuple(factor)
    if lo > hi or lo < -1 or hi > 1:
        raise ValueError(f"`{what}` must be a float or a (lower, upper) pair with -1 <= lower <= upper <= 1. "
                         f"Received: {what}={factor!r}")
    return float(lo), float(hi)
