"""``md.keras.utils.image_dataset_from_directory``, ``load_img`` and ``img_to_array``.

tf.keras's rules, as ``text_dataset_from_directory``'s: one subdirectory per class, files walked in
sorted order, shuffled once with ``np.random.RandomState(seed)`` and split into training and validation,
shuffled again per epoch (a buffer of 8 batches). Images are decoded with PIL, converted to ``color_mode``,
and resized as ``tf.image.resize`` does (half-pixel centres, no antialiasing: torch's ``interpolate``),
to float32 ``(height, width, channels)`` holding 0..255. PNG/BMP/GIF pixels are TF's; JPEG pixels may differ
from TF's by a few levels: PIL decodes with libjpeg's accurate integer DCT, ``tf.io.decode_image`` with the
fast one (``decode_jpeg(dct_method="INTEGER_ACCURATE")`` gives PIL's). Files are read lazily, per epoch, as TF reads
them (the classification tutorial's ``.cache()`` keeps the decoded images).

Example:
    train_ds = md.keras.utils.image_dataset_from_directory("flower_photos", validation_split=0.2,
                                                           subset="training", seed=123,
                                                           image_size=(180, 180), batch_size=32)
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from multidev import data
from multidev.keras.utils import text_dataset

ALLOWED_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
_COLOR_MODES = {"rgb": "RGB", "rgba": "RGBA", "grayscale": "L"}
_INTERPOLATIONS = {"bilinear": "bilinear", "nearest": "nearest-exact"}   # TF 2's resize: half-pixel centres


def _pil_image():
    try:
        from PIL import Image
    except ImportError as e:   # as tf.keras's load_img
        raise ImportError("md.keras.utils image loading needs PIL: install Pillow (`pip install pillow`).") from e
    return Image


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {sorted(choices)}. Received: {name}={value!r}")


def _center_crop(pixels, height, width):
    """The largest centred window of ``height / width``'s aspect ratio (``crop_to_aspect_ratio=True``)."""
    h, w = pixels.shape[:2]
    crop_h, crop_w = min(h, int(w * height / width)), min(w, int(h * width / height))
    top, left = (h - crop_h) // 2, (w - crop_w) // 2
    return pixels[top:top + crop_h, left:left + crop_w]


def _resize(pixels, size, interpolation):
    """``tf.image.resize(pixels, size, method)`` of an (h, w, c) array, as float32."""
    x = torch.from_numpy(np.ascontiguousarray(pixels, dtype="float32")).permute(2, 0, 1)[None]
    if tuple(x.shape[2:]) != tuple(size):
        align = {} if interpolation == "nearest" else {"align_corners": False}
        x = torch.nn.functional.interpolate(x, size=tuple(size), mode=_INTERPOLATIONS[interpolation],
                                            antialias=False, **align)
    return x[0].permute(1, 2, 0).numpy()


def _decode(path, color_mode, image_size, interpolation, crop_to_aspect_ratio):
    with _pil_image().open(str(path)) as img:
        pixels = np.asarray(img.convert(_COLOR_MODES[color_mode]))
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if crop_to_aspect_ratio:
        pixels = _center_crop(pixels, *image_size)
    return _resize(pixels, image_size, interpolation)


def image_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None,
                                 color_mode="rgb", batch_size=32, image_size=(256, 256), shuffle=True, seed=None,
                                 validation_split=None, subset=None, interpolation="bilinear", follow_links=False,
                                 crop_to_aspect_ratio=False, verbose=True, **kwargs):
    """A dataset of (image, label) batches from ``directory/<class>/*.png|jpg|...`` (see the module docstring).

    Returns:
        An ``md.data.Dataset`` with ``class_names`` and ``file_paths`` attributes; a list [training, validation]
        when ``subset="both"``.

    Raises:
        ValueError: bad ``labels``, ``label_mode``, ``color_mode``, ``interpolation``, split arguments,
            ``kwargs``, or no image files.
    """
    if kwargs:
        raise TypeError(f"image_dataset_from_directory got unknown keyword arguments: {sorted(kwargs)}")
    _check_choice("color_mode", color_mode, _COLOR_MODES)
    _check_choice("interpolation", interpolation, _INTERPOLATIONS)
    if len(tuple(image_size)) != 2:
        raise ValueError(f"`image_size` must be (height, width). Received: image_size={image_size!r}")
    image_size = tuple(int(v) for v in image_size)
    if label_mode not in text_dataset._LABEL_MODES:
        raise ValueError(f'`label_mode` argument must be one of "int", "categorical", "binary", or None. '
                         f"Received: label_mode={label_mode!r}")
    if labels is None or label_mode is None:
        labels = label_mode = None
    text_dataset._check_split(validation_split, subset, shuffle, seed)
    seed = int(np.random.randint(1e6)) if seed is None else seed
    paths, ids, names = text_dataset._index(directory, labels, class_names, follow_links, ALLOWED_FORMATS)
    if verbose:
        print(f"Found {len(paths)} files." if ids is None else f"Found {len(paths)} files belonging to "
              f"{len(names)} classes.")
    if shuffle:   # tf.keras's order: the same seeded permutation of paths and labels
        np.random.RandomState(seed).shuffle(paths)
        if ids is not None:
            np.random.RandomState(seed).shuffle(ids)
    n_val = int(validation_split * len(paths)) if validation_split else 0
    parts = {"training": slice(0, len(paths) - n_val), "validation": slice(len(paths) - n_val, len(paths)),
             None: slice(0, len(paths))}
    out = []
    for part in ["training", "validation"] if subset == "both" else [subset]:
        sel = parts[part]
        if sel.stop <= sel.start:
            raise ValueError(f"No {'' if part is None else part + ' '}images found in directory {directory!r}. "
                             f"Allowed formats: {ALLOWED_FORMATS}")
        if verbose and part is not None:
            print(f"Using {sel.stop - sel.start} files for {part}.")
        load = functools.partial(_decode, color_mode=color_mode, image_size=image_size, interpolation=interpolation,
                                 crop_to_aspect_ratio=crop_to_aspect_ratio)
        elements = np.asarray(paths[sel], dtype=str)
        if ids is not None:
            elements = (elements, text_dataset._encode(ids[sel], label_mode, len(names)))
        dataset = data.Dataset.from_tensor_slices(elements)
        if shuffle and part != "validation":
            dataset = dataset.shuffle(1024 if batch_size is None else batch_size * 8, seed=seed)
        dataset = dataset.map(load) if ids is None else dataset.map(lambda path, label: (load(path), label))
        if batch_size is not None:
            dataset = dataset.batch(batch_size)
        dataset.class_names, dataset.file_paths = names, list(paths[sel])
        out.append(dataset)
    return out if subset == "both" else out[0]


def load_img(path, grayscale=False, color_mode="rgb", target_size=None, interpolation="nearest",
             keep_aspect_ratio=False):
    """A PIL image of ``path`` in ``color_mode``, resized by PIL to ``target_size`` (height, width)."""
    image = _pil_image()
    color_mode = "grayscale" if grayscale else color_mode
    _check_choice("color_mode", color_mode, _COLOR_MODES)
    resample = {"nearest": image.NEAREST, "bilinear": image.BILINEAR, "bicubic": image.BICUBIC,
                "lanczos": image.LANCZOS, "box": image.BOX, "hamming": image.HAMMING}
    _check_choice("interpolation", interpolation, resample)
    with image.open(str(path)) as img:
        img = img.convert(_COLOR_MODES[color_mode])
    if target_size is not None and (img.size[1], img.size[0]) != tuple(target_size):
        if keep_aspect_ratio:
            img = image.fromarray(_center_crop(np.asarray(img), *target_size))
        img = img.resize((target_size[1], target_size[0]), resample[interpolation])
    return img


def img_to_array(img, data_format=None, dtype="float32"):
    """A PIL image as a numpy ``(height, width, channels)`` array (``channels_first``: channels leading)."""
    _check_choice("data_format", data_format or "channels_last", ("channels_last", "channels_first"))
    pixels = np.asarray(img, dtype=dtype)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.ndim != 3:
        raise ValueError(f"Unsupported image shape: {pixels.shape}; expected (height, width[, channels]).")
    return pixels.transpose(2, 0, 1) if data_format == "channels_first" else pixels
