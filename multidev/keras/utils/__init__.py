"""``md.keras.utils``: to_categorical, normalize, Progbar, custom objects, data packing helpers.

Example:
    md.keras.utils.to_categorical([0, 2, 1], num_classes=3)
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
import numpy as np
import torch

from multidev.keras.callbacks.progbar import Progbar
from multidev.keras.utils import experimental
from multidev.keras.utils.py_dataset import PyDataset, Sequence
from multidev.keras.utils.random_seed import set_random_seed
from multidev.keras.utils.sidecar_evaluator import SidecarEvaluator
from multidev.keras.preprocessing.sequence import pad_sequences
from multidev.keras.utils.text_dataset import text_dataset_from_directory
from multidev.keras.utils.image_dataset import image_dataset_from_directory, img_to_array, load_img
from multidev.keras.utils.timeseries_dataset import timeseries_dataset_from_array
from multidev.keras.models.data_adapter import pack_x_y_sample_weight, unpack_x_y_sample_weight
from multidev.keras.saving.serialization import (custom_object_scope, get_custom_objects,
                                                 register_keras_serializable)


def to_categorical(y, num_classes=None, dtype="float32"):
    """One-hot encode integer class vectors: shape ``y.shape + (num_classes,)`` (a trailing 1 is dropped)."""
    y = np.asarray(y, dtype="int64")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    y = y.reshape(-1)
    if y.size and y.min() < 0:
        raise ValueError(f"to_categorical received a negative class id {int(y.min())}; class ids must be >= 0.")
    if num_classes is None:
        num_classes = int(y.max()) + 1 if y.size else 0
    elif y.size and int(y.max()) >= num_classes:
        raise ValueError(f"to_categorical received class id {int(y.max())}, outside the valid range [0, {num_classes}). "
                         "Increase num_classes.")
    out = np.zeros((y.size, num_classes), dtype=dtype)
    out[np.arange(y.size), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2):
    """Scale ``x`` to unit ``order``-norm along ``axis``: a numpy array in numpy (zero vectors stay zero), a tensor
    with ``ops.normalize`` (differentiable: keras.io's SupervisedContrastiveLoss normalises the features with it)."""
    if isinstance(x, torch.Tensor):
        from multidev.keras import ops
        return ops.normalize(x, axis=axis, order=order)
    x = np.asarray(x, dtype="float32")
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


__all__ = ["experimental", "PyDataset", "Sequence", "text_dataset_from_directory", "image_dataset_from_directory", "load_img",
           "img_to_array", "timeseries_dataset_from_array", "pad_sequences", "SidecarEvaluator", "to_categorical", "normalize", "set_random_seed", "Progbar", "pack_x_y_sample_weight",
           "unpack_x_y_sample_weight", "custom_object_scope", "get_custom_objects", "register_keras_serializable"]

__getattr__ = missing_names(__name__, 'utils', globals())  # unknown names: does Keras 3 have them?
