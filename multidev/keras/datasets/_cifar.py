"""CIFAR's batches as Keras caches them (``cifar-10-batches-py``/``cifar-100-python``), or a pickle-free npz.

CIFAR's own batch files are Python pickles: they are read only with ``allow_pickle=True``, through an
unpickler that builds nothing but numpy arrays. ``save_npz`` writes the four arrays once as a plain
npz that later loads with no pickle at all.
"""

from __future__ import annotations

import os

import numpy as np

from multidev.keras.datasets import _cache, _safe_pickle
from multidev.keras.datasets.mnist import load_npz_splits


def save_npz(train, test, path):
    """Write ``(x_train, y_train), (x_test, y_test)`` as a plain npz (loadable without pickle via ``path=``)."""
    (x_train, y_train), (x_test, y_test) = train, test
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


def read_batch(path: str, label_key: str):
    """``(images (n, 3, 32, 32) uint8, labels)`` from one pickled CIFAR batch."""
    raw = _safe_pickle.load_pickle(path)
    batch = {k.decode("utf8") if isinstance(k, bytes) else k: v for k, v in raw.items()}
    if "data" not in batch or label_key not in batch:
        raise ValueError(f"{path!r} is not a CIFAR batch with 'data' and {label_key!r}; it has {sorted(batch)}.")
    data = np.asarray(batch["data"], dtype=np.uint8)
    return data.reshape(data.shape[0], 3, 32, 32), np.asarray(batch[label_key], dtype=np.uint8)


def load(path, keras_dirs, train_files, test_file, label_key, allow_pickle, what, origin):
    """Both splits, channels last, labels of shape (n, 1), as Keras returns them."""
    if path is not None and os.path.isfile(os.fspath(path)):
        return load_npz_splits(os.fspath(path))
    directory = _cache.resolve_dir(path, keras_dirs, [*train_files, test_file], what, origin)
    if not allow_pickle:
        raise _safe_pickle.consent_error(directory, f"{what}'s batches as Python pickles",
                                         "then save_npz((x_train, y_train), (x_test, y_test), 'file.npz') writes a "
                                         "pickle-free copy to load with path='file.npz'.")
    train = [read_batch(os.path.join(directory, f), label_key) for f in train_files]
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    x_test, y_test = read_batch(os.path.join(directory, test_file), label_key)
    to_last = lambda x: x.transpose(0, 2, 3, 1)  # noqa: E731 (multidev's layers are channels_last, as Keras's default)
    return (to_last(x_train), y_train.reshape(-1, 1)), (to_last(x_test), y_test.reshape(-1, 1))
