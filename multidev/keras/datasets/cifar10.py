"""CIFAR-10 (50,000 + 10,000 colour images of 32 x 32, 10 classes) from Keras's cache.

No network access. Keras 3 unpacks the archive to
``$KERAS_HOME/datasets/cifar-10-batches-py-target/cifar-10-batches-py/`` (Keras 2:
``~/.keras/datasets/cifar-10-batches-py/``); both are looked at, or pass the batch directory as
``path=``. The batches are Python pickles, so reading them needs ``allow_pickle=True`` (only numpy
arrays are built); ``save_npz`` writes a pickle-free copy that loads with ``path="copy.npz"``.

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.cifar10.load_data(allow_pickle=True)
    x_train.shape, y_train.shape  # (50000, 32, 32, 3), (50000, 1)
"""

from __future__ import annotations

from multidev.keras.datasets import _cifar
from multidev.keras.datasets._cifar import save_npz

__all__ = ["load_data", "save_npz"]

_DIRS = ["cifar-10-batches-py-target/cifar-10-batches-py", "cifar-10-batches-py"]
_ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


def load_data(path=None, allow_pickle=False):
    """Keras's ``cifar10.load_data``: uint8 images (n, 32, 32, 3) and labels (n, 1).

    Example:
        >>> (x_train, y_train), _ = md.keras.datasets.cifar10.load_data(allow_pickle=True)
    """
    return _cifar.load(path, _DIRS, [f"data_batch_{i}" for i in range(1, 6)], "test_batch", "labels", allow_pickle,
                       "CIFAR-10", _ORIGIN)
