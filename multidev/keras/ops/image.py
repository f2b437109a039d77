"""``md.keras.ops.image``: image ops on channels-last tensors, as ``keras.ops.image``.

Example:
    ops.image.resize(images, (32, 32))          # (batch, 32, 32, channels), bilinear
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras._missing import missing_names
from multidev.keras.ops.core import convert_to_tensor

_MODES = {"bilinear": "bilinear", "nearest": "nearest-exact", "bicubic": "bicubic"}


def _batch_channels_first(images, data_format):
    """(a batch of channels-first images, whether ``images`` was one image): torch's image ops' layout.

    Raises:
        ValueError: a rank other than 3 (one image) or 4 (a batch).
    """
    images = convert_to_tensor(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"Invalid images rank: expected rank 3 (single image) or rank 4 (batch of images). "
                         f"Received input with shape: {tuple(images.shape)}")
    single = images.ndim == 3
    x = images.unsqueeze(0) if single else images
    return (x.permute(0, 3, 1, 2) if data_format in (None, "channels_last") else x), single


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
    x, single = _batch_channels_first(images, data_format)
    channels_last = data_format in (None, "channels_last")
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


def extract_patches(images, size, strides=None, dilation_rate=1, padding="valid", data_format=None):
    """Keras 3's ``ops.image.extract_patches``: each ``size`` patch of channels-last ``images`` flattened in
    (row, column, channel) order: (batch, rows, columns, size_h * size_w * channels) (keras.io's ViT ``Patches``).

    Raises:
        ValueError: an unknown ``padding``, a rank other than 3 or 4, or ``dilation_rate`` other than 1
            (Keras 3 on multidev has it).
    """
    if padding not in ("valid", "same"):
        raise ValueError(f"Invalid value for argument `padding`: {padding!r}. Expected 'valid' or 'same'.")
    if dilation_rate != 1:
        raise ValueError(f"md.keras.ops.image.extract_patches supports dilation_rate=1 only; received "
                         f"dilation_rate={dilation_rate!r}. Use Keras 3 (`import keras`) on multidev.")
    x, single = _batch_channels_first(images, data_format)
    kh, kw = (size, size) if isinstance(size, int) else tuple(size)
    sh, sw = (kh, kw) if strides is None else (strides, strides) if isinstance(strides, int) else tuple(strides)
    if padding == "same":   # TensorFlow's SAME: the output covers ceil(size / stride), the extra padding after
        pads = [max((-(-n // st) - 1) * st + k - n, 0) for n, k, st in ((x.shape[3], kw, sw), (x.shape[2], kh, sh))]
        x = F.pad(x, (pads[0] // 2, pads[0] - pads[0] // 2, pads[1] // 2, pads[1] - pads[1] // 2))
    batch, channels, height, width = x.shape
    rows, cols = (height - kh) // sh + 1, (width - kw) // sw + 1
    unfolded = F.unfold(x, (kh, kw), stride=(sh, sw))   # (batch, channels * kh * kw, rows * cols), channel-major
    out = unfolded.view(batch, channels, kh, kw, rows, cols).permute(0, 4, 5, 2, 3, 1).reshape(
        batch, rows, cols, kh * kw * channels)
    if data_format == "channels_first":
        out = out.permute(0, 3, 1, 2)
    return out[0] if single else out


__all__ = ["resize", "extract_patches"]
__getattr__ = missing_names(__name__, "ops.image", globals())
