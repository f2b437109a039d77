"""Keras 3's Resizing, CenterCrop and RandomCrop on channels-last images (batched or not), with TF 2.21's numbers:
'bilinear' is ``tf.image.resize``'s half-pixel bilinear (torch's ``align_corners=False``), 'nearest' its
half-pixel nearest (torch's 'nearest-exact', not 'nearest'); kernels whose torch form differs from TF's
(bicubic, area, lanczos) are refused rather than computed differently.

Example:
    small = md.keras.layers.Resizing(64, 64, crop_to_aspect_ratio=True)(images)
"""

from __future__ import annotations

import torch.nn.functional as F

import torch

from multidev.keras import batch_draw
from multidev.keras.layers.base import Layer

_MODES = {"bilinear": "bilinear", "nearest": "nearest-exact"}


def _image_float(layer, inputs):
    return inputs if inputs.is_floating_point() else inputs.to(layer._compute_torch_dtype)


def _crop_box(height, width, target_height, target_width):
    """TF's crop_to_aspect_ratio box: the largest centered box of the target's aspect ratio."""
    crop_h = max(min(height, int(float(width * target_height) / target_width)), 1)
    crop_w = max(min(width, int(float(height * target_width) / target_height)), 1)
    return int((height - crop_h) / 2), int((width - crop_w) / 2), crop_h, crop_w


def _resize(x, height, width, interpolation="bilinear"):
    """A batch of channels-last images resized as ``tf.image.resize`` resizes them (half-pixel centers)."""
    return F.interpolate(x.movedim(-1, 1), size=(height, width), mode=_MODES[interpolation],
                         **({"align_corners": False} if interpolation == "bilinear" else {})).movedim(1, -1)


class Resizing(Layer):
    """Resize images to (height, width); ``crop_to_aspect_ratio`` first crops the centered box of the
    target's aspect ratio."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, antialias=False,
                 data_format=None, **kwargs):
        super().__init__(**kwargs)
        if interpolation not in _MODES or pad_to_aspect_ratio or antialias:
            raise NotImplementedError(
                f"Resizing(interpolation={interpolation!r}, pad_to_aspect_ratio={pad_to_aspect_ratio!r}, "
                f"antialias={antialias!r}) is not implemented in md.keras: only 'bilinear' and 'nearest' without "
                "padding or antialiasing compute TF's numbers with torch (its bicubic/area kernels differ).")
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.height, self.width, self.interpolation = int(height), int(width), interpolation
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)

    def call(self, inputs):
        x = _image_float(self, inputs)
        batched = x.ndim == 4
        x = x if batched else x.unsqueeze(0)
        if self.crop_to_aspect_ratio:
            top, left, h, w = _crop_box(x.shape[1], x.shape[2], self.height, self.width)
            x = x[:, top:top + h, left:left + w]
        out = _resize(x, self.height, self.width, self.interpolation)
        return out if batched else out[0]

    def get_config(self):
        return {**super().get_config(), "height": self.height, "width": self.width,
                "interpolation": self.interpolation, "crop_to_aspect_ratio": self.crop_to_aspect_ratio}


class CenterCrop(Layer):
    """The centered (height, width) window of each image (the extra odd row/column stays at the end)."""

    def __init__(self, height, width, data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.height, self.width = int(height), int(width)

    def call(self, inputs):
        x = _image_float(self, inputs)
        h, w = x.shape[-3], x.shape[-2]
        if h < self.height or w < self.width:
            raise NotImplementedError(
                f"CenterCrop({self.height}, {self.width}) of a smaller image ({h}x{w}): Keras then resizes with "
                "smart_resize, which md.keras does not implement. Resize first (layers.Resizing).")
        top, left = (h - self.height) // 2, (w - self.width) // 2
        return x[..., top:top + self.height, left:left + self.width, :]

    def get_config(self):
        return {**super().get_config(), "height": self.height, "width": self.width}


class RandomCrop(Layer):
    """While training, the (height, width) window at ONE random offset for the whole batch (Keras 3.15's rule; the
    offset is drawn once per step, on replicas too); an image not larger than the window in both dimensions gets
    Keras's aspect-ratio box instead, resized to (height, width) when its size differs. In inference the images
    pass unchanged, as Keras 3.15 passes them.

    Example:
        crop = md.keras.layers.RandomCrop(32, 32, seed=1)   # keras.io's CCT augmentation
    """

    def __init__(self, height, width, seed=None, data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise ValueError(f"Only data_format='channels_last' is supported. Received: data_format={data_format!r}")
        self.height, self.width, self.seed = int(height), int(width), seed
        self._rng = None if seed is None else torch.Generator().manual_seed(int(seed))

    def call(self, inputs, training=False):
        if not training:
            return inputs
        x = _image_float(self, inputs)
        h, w = x.shape[-3], x.shape[-2]
        if h > self.height and w > self.width:
            top, left = (int(v) for v in batch_draw.once(lambda: torch.stack([
                torch.randint(0, h - self.height + 1, (), generator=self._rng),
                torch.randint(0, w - self.width + 1, (), generator=self._rng)])))
        else:
            top, left, _, _ = _crop_box(h, w, self.height, self.width)
        x = x[..., top:top + self.height, left:left + self.width, :]
        if (x.shape[-3], x.shape[-2]) != (self.height, self.width):
            x = _resize(x, self.height, self.width) if x.ndim == 4 else _resize(x[None], self.height, self.width)[0]
        return x

    def get_config(self):
        return {**super().get_config(), "height": self.height, "width": self.width, "seed": self.seed}
