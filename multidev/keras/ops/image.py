"""``md.keras.ops.image``: image ops on channels-last tensors, as ``keras.ops.image``.

Example:
    ops.image.resize(images, (32, 32))          # (batch, 32, 32, channels), bilinear
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.ops.core import convert_to_tensor

_MODES = {"bilinear": "bilinear", "nearest": "nearest-exact", "bicubic": "bicubic"}


def resize(images, size, interpolation="bilinear", antialias=False, crop_to_aspect_ratio=False,
           pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, data_format=None):
    """``images`` (3-D or 4-D) resized to ``size`` = (height, width).

    Raises:
        ValueError: an unknown ``interpolation``, a rank other than 3 or 4, or aspect-ratio cropping
            or padding (not implemented here: Keras 3 on multidev has them).
    """
    if interpolation not in _MODES:
        raise ValueError(f"Invalid value for argument `interpolation`: {interpolation!r}. "
                         f"Expected one of {sorted(_MODES)}.")
    if crop_to_aspect_ratio or pad_to_aspect_ratio:
        raise ValueError("md.keras.ops.image.resize does not crop or pad to the aspect ratio; resize to a size "
                         "of the same aspect ratio, or use Keras 3 (`import keras`) on multidev.")
    images = convert_to_tensor(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"Invalid images rank: expected rank 3 (single image) or rank 4 (batch of images). "
                         f"Received input with shape: {tuple(images.shape)}")
    single = images.ndim == 3
    x = images.unsqueeze(0) if single else images
    channels_last = data_format in (None, "channels_last")
    if channels_last:
        x = x.permute(0, 3, 1, 2)
    dtype = x.dtype
    if not x.is_floating_point():
        x = x.float()
    mode = _MODES[interpolation]
    out = F.interpolate(x, size=tuple(size), mode=mode, antialias=antialias and mode != "nearest-exact",
                        align_corners=False if mode in ("bilinear", "bicubic") else None)
    if dtype != out.dtype:
        out = out.round().to(dtype) if dtype != torch.bool else out.bool()
    if channels_last:
        out = out.permute(0, 2, 3, 1)
    return out[0] if single else out


__all__ = ["resize"]
