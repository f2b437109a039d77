"""CIFAR-100 (50,000 + 10,000 colour images of 32 x 32; 100 fine or 20 coarse classes) from Keras's cache.

No network access. Keras 3 unpacks the archive to
``$KERAS_HOME/datasets/cifar-100-python-target/cifar-100-python/`` (Keras 2:
``~/.keras/datasets/cifar-100-python/``); both are looked at, or pass the directory as ``path=``.
The files are Python pickles: reading them needs ``allow_pickle=True`` (only numpy arrays are built).

Example:
    (x_train, y_train), (x_test, y_test) = md.keras.datasets.cifar100.load_data("coarse", allow_pickle=True)
"""

from __future__ import annotations

from multidev.keras.datasets import _cifar
from multidev.keras.datasets._cifar import save_npz

__all__ = ["load_data", "save_npz"]

_DIRS = ["cifar-100-python-target/cifar-100-python", "cifar-100-python"]
_ORIGIN = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"


def load_data(label_mode="fine", path=None, allow_pickle=False):
    """Keras's ``cifar100.load_data``: uint8 images (n, 32, 32, 3) and ``label_mode`` labels (n, 1).

    Example:
        >>> (x_train, y_train), _ = md.keras.datasets.cifar100.load_data("coarse", allow_pickle=True)
    """
    if label_mode not in ("fine", "coarse"):
        raise ValueError(f'`label_mode` must be one of "fine", "coarse". Received: label_mode={label_mode!r}.')
    return _cifar.load(path, _DIRS, ["train"], "test", f"{label_mode}_labels", allow_pickle, "CIFAR-100", _ORIGIN)
