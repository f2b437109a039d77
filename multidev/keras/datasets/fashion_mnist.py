"""Fashion-MNIST (60,000 + 10,000 images of 28 x 28 clothing, 10 classes) from Keras's cached IDX files.

No network access: Keras keeps the four gzipped IDX files in ``$KERAS_HOME/datasets/fashion-mnist/``
(default ``~/.keras/datasets/fashion-mnist/``); put them there or pass the directory as ``path=``.
IDX is a plain binary format: nothing is unpickled.

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.fashion_mnist.load_data()
"""

from __future__ import annotations

import gzip
import os

import numpy as np

from multidev.keras.datasets import _cache

FILES = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
_ORIGIN = _cache.KERAS_ORIGIN + "fashion-mnist/"


def _read_idx(path: str, header_bytes: int, shape: tuple) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = np.frombuffer(f.read(), np.uint8, offset=header_bytes)
    try:
        return data.reshape(shape)
    except ValueError:
        raise ValueError(f"{path!r} holds {data.size} values after its header, which is not a whole number of "
                         f"{shape[1:] or 'labels'} records; the file is damaged or of another data set.") from None


def load_data(path=None):
    """Keras's ``fashion_mnist.load_data``: ``(x_train, y_train), (x_test, y_test)`` as uint8 arrays.

    Example:
        >>> (x_train, y_train), _ = md.keras.datasets.fashion_mnist.load_data()
    """
    directory = _cache.resolve_dir(path, ["fashion-mnist"], list(FILES), "Fashion-MNIST", _ORIGIN)
    files = [os.path.join(directory, f) for f in FILES]
    y_train = _read_idx(files[0], 8, (-1,))
    x_train = _read_idx(files[1], 16, (-1, 28, 28))
    y_test = _read_idx(files[2], 8, (-1,))
    x_test = _read_idx(files[3], 16, (-1, 28, 28))
    return (x_train, y_train), (x_test, y_test)
