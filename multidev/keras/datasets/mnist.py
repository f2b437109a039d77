"""MNIST handwritten digits (60,000 + 10,000 images of 28 x 28, uint8) from Keras's ``mnist.npz``.

No network access: put the file at ``$KERAS_HOME/datasets/mnist.npz`` (default
``~/.keras/datasets/mnist.npz``, where Keras caches it) or pass ``path=``. The file holds plain
arrays ``x_train``, ``y_train``, ``x_test``, ``y_test``: nothing is unpickled.

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.mnist.load_data()
    x_train.shape  # (60000, 28, 28)
"""

from __future__ import annotations

import numpy as np

from multidev.keras.datasets import _cache

_ORIGIN = _cache.KERAS_ORIGIN + "mnist.npz"


def load_npz_splits(path: str) -> tuple:
    """``(x_train, y_train), (x_test, y_test)`` from an npz of plain arrays with those four names."""
    with np.load(path, allow_pickle=False) as f:
        missing = {"x_train", "y_train", "x_test", "y_test"} - set(f.files)
        if missing:
            raise ValueError(f"{path!r} lacks the arrays {sorted(missing)}; it has {sorted(f.files)}.")
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])


def load_data(path="mnist.npz"):
    """Keras's ``mnist.load_data``: ``(x_train, y_train), (x_test, y_test)`` as uint8 numpy arrays.

    Example:
        >>> (x_train, y_train), (x_test, y_test) = md.keras.datasets.mnist.load_data()
    """
    return load_npz_splits(_cache.resolve_file(path, "mnist.npz", "mnist.npz", _ORIGIN))
