"""Keras's tutorial data sets read offline from Keras's cache layout (``$KERAS_HOME/datasets``)."""

import gzip
import os
import pickle
import struct

import numpy as np
import pytest

from multidev.keras import datasets


@pytest.fixture
def keras_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "kh"))
    os.makedirs(tmp_path / "kh" / "datasets")
    return tmp_path / "kh" / "datasets"


def test_mnist_from_the_cache_and_from_a_path(keras_home, tmp_path):
    rng = np.random.RandomState(0)
    arrays = dict(x_train=rng.randint(0, 255, (6, 28, 28)).astype(np.uint8), y_train=np.arange(6, dtype=np.uint8),
                  x_test=rng.randint(0, 255, (2, 28, 28)).astype(np.uint8), y_test=np.arange(2, dtype=np.uint8))
    np.savez(keras_home / "mnist.npz", **arrays)
    (x_train, y_train), (x_test, y_test) = datasets.mnist.load_data()
    np.testing.assert_array_equal(x_train, arrays["x_train"])
    np.testing.assert_array_equal(y_test, arrays["y_test"])
    np.savez(tmp_path / "elsewhere.npz", **arrays)
    assert datasets.mnist.load_data(path=str(tmp_path / "elsewhere.npz"))[0][0].shape == (6, 28, 28)


def test_missing_file_names_where_it_looked_what_to_download_and_where(keras_home):
    os.remove(keras_home / "mnist.npz") if (keras_home / "mnist.npz").exists() else None
    with pytest.raises(FileNotFoundError) as err:
        datasets.mnist.load_data()
    message = str(err.value)
    assert str(keras_home / "mnist.npz") in message and "never downloads" in message
    assert "tf-keras-datasets/mnist.npz" in message and "KERAS_HOME" in message
    with pytest.raises(FileNotFoundError, match=r"cifar-10-python\.tar\.gz and unpack it.*cifar-10-batches-py"):
        datasets.cifar10.load_data()


def _idx(path, magic, dims, payload):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload.tobytes())


def test_fashion_mnist_reads_keras_idx_files(keras_home):
    folder = keras_home / "fashion-mnist"
    folder.mkdir()
    images = np.arange(3 * 28 * 28, dtype=np.uint64).astype(np.uint8).reshape(3, 28, 28)
    labels = np.array([9, 0, 4], dtype=np.uint8)
    for split, n in (("train", 3), ("t10k", 3)):
        _idx(folder / f"{split}-labels-idx1-ubyte.gz", 2049, [n], labels)
        _idx(folder / f"{split}-images-idx3-ubyte.gz", 2051, [n, 28, 28], images)
    (x_train, y_train), (x_test, y_test) = datasets.fashion_mnist.load_data()
    np.testing.assert_array_equal(x_train, images)
    np.testing.assert_array_equal(y_test, labels)
    _idx(folder / "t10k-images-idx3-ubyte.gz", 2051, [3, 28, 28], images.reshape(-1)[:-5])
    with pytest.raises(ValueError, match="damaged"):
        datasets.fashion_mnist.load_data()


def _cifar_batch(path, n, label_key, seed):
    rng = np.random.RandomState(seed)
    data = rng.randint(0, 255, (n, 3 * 32 * 32)).astype(np.uint8)
    labels = rng.randint(0, 10, n).tolist()
    with open(path, "wb") as f:  # the test writes the pickle that Keras's cache would hold
        pickle.dump({b"batch_label": b"x", label_key.encode(): labels, b"data": data}, f)
    return data, labels


def test_cifar10_needs_consent_then_builds_only_arrays(keras_home, tmp_path):
    folder = keras_home / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    written = [_cifar_batch(folder / f"data_batch_{i}", 2, "labels", i) for i in range(1, 6)]
    test_data, test_labels = _cifar_batch(folder / "test_batch", 3, "labels", 9)
    with pytest.raises(ValueError, match="Python pickles.*allow_pickle=True"):
        datasets.cifar10.load_data()
    (x_train, y_train), (x_test, y_test) = datasets.cifar10.load_data(allow_pickle=True)
    assert x_train.shape == (10, 32, 32, 3) and y_train.shape == (10, 1) and x_test.shape == (3, 32, 32, 3)
    # channels last: pixel (row 1, col 2) of channel 2 of the first image is element 2*1024 + 1*32 + 2 of the row
    assert x_train[0, 1, 2, 2] == written[0][0][0, 2 * 1024 + 32 + 2]
    assert y_test[:, 0].tolist() == test_labels
    datasets.cifar10.save_npz((x_train, y_train), (x_test, y_test), str(tmp_path / "c10.npz"))
    again = datasets.cifar10.load_data(path=str(tmp_path / "c10.npz"))  # plain arrays: no consent needed
    np.testing.assert_array_equal(again[0][0], x_train)


class _Gadget:
    def __reduce__(self):
        return (os.getcwd, ())


def test_a_crafted_pickle_is_refused_even_with_consent(keras_home):
    folder = keras_home / "cifar-100-python"
    folder.mkdir()
    for name in ("train", "test"):
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": _Gadget(), b"fine_labels": [1]}, f)
    with pytest.raises(pickle.UnpicklingError, match="posix.getcwd|os.getcwd"):
        datasets.cifar100.load_data(allow_pickle=True)


def test_cifar100_label_modes(keras_home):
    folder = keras_home / "cifar-100-python"
    folder.mkdir()
    for name, n in (("train", 4), ("test", 2)):
        rng = np.random.RandomState(n)
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": rng.randint(0, 255, (n, 3072)).astype(np.uint8),
                         b"fine_labels": list(range(50, 50 + n)), b"coarse_labels": list(range(n))}, f)
    (_, fine), _ = datasets.cifar100.load_data(allow_pickle=True)
    (_, coarse), _ = datasets.cifar100.load_data("coarse", allow_pickle=True)
    assert fine[:, 0].tolist() == [50, 51, 52, 53] and coarse[:, 0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="label_mode='medium'"):
        datasets.cifar100.load_data("medium")


def _reviews(n, seed):
    rng = np.random.RandomState(seed)
    xs = [rng.randint(1, 40, rng.randint(2, 9)).tolist() for _ in range(n)]
    return xs, np.array([len(x) % 2 for x in xs])  # the label is a function of the review: order is checkable


def _object_array(seqs):
    out = np.empty(len(seqs), dtype=object)
    for i, s in enumerate(seqs):
        out[i] = s
    return out


def test_imdb_keras_layout_and_processing(keras_home, tmp_path):
    (x_tr, y_tr), (x_te, y_te) = _reviews(20, 1), _reviews(10, 2)
    np.savez(keras_home / "imdb.npz", x_train=_object_array(x_tr), y_train=y_tr, x_test=_object_array(x_te),
             y_test=y_te)
    with pytest.raises(ValueError, match="pickled object arrays.*allow_pickle=True"):
        datasets.imdb.load_data()
    (x_train, y_train), (x_test, y_test) = datasets.imdb.load_data(num_words=20, allow_pickle=True)
    assert len(x_train) == 20 and len(x_test) == 10
    originals = {tuple(x) for x in x_tr}
    for x, y in zip(x_train, y_train):
        assert x[0] == 1 and len(x) % 2 != y  # start_char added: one longer than the raw review
        assert all(w == 2 or 3 <= w < 20 for w in x[1:])  # shifted by 3; ids >= num_words became oov (2)
    assert {tuple(w - 3 for w in x[1:]) for x in datasets.imdb.load_data(allow_pickle=True)[0][0]} == originals
    short = datasets.imdb.load_data(maxlen=6, allow_pickle=True)[0][0]
    assert all(len(x) < 6 for x in short)
    datasets.imdb.save_safe_npz((x_tr, y_tr), (x_te, y_te), str(tmp_path / "imdb_safe.npz"))
    safe = datasets.imdb.load_data(path=str(tmp_path / "imdb_safe.npz"), num_words=20)
    assert [list(x) for x in safe[0][0]] == [list(x) for x in x_train]
