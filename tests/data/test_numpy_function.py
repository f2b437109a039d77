"""``md.numpy_function`` and ``md.py_function``: TensorFlow's escape to Python in a data pipeline, as keras.io's 3D
image classification augments CT volumes (``tf.numpy_function(scipy_rotate, [volume], tf.float32)`` in a
``Dataset.map``). Results follow TensorFlow 2.21's rule where these run (a ``Dataset.map`` or ``tf.function``
graph): a ``numpy_function`` result must have ``Tout``'s dtype (``InvalidArgumentError`` otherwise, naming both);
a ``py_function`` result is converted to ``Tout`` (a Python number takes it; a tensor of another dtype is refused).
Before: AttributeError "tf.numpy_function is not part of multidev"."""

import numpy as np
import pytest
import torch

import multidev as md


def rotate(volume):
    def np_rotate(volume):
        volume = np.rot90(volume, k=1, axes=(0, 1)).copy()
        volume[volume < 0] = 0
        volume[volume > 1] = 1
        return volume

    augmented_volume = md.numpy_function(np_rotate, [volume], md.float32)
    return augmented_volume


def train_preprocessing(volume, label):
    volume = rotate(volume)
    volume = md.expand_dims(volume, axis=3)
    return volume, label


def test_three_d_classification_pipeline():
    x = np.random.RandomState(0).uniform(-0.5, 1.5, (4, 3, 3, 2)).astype("float32")
    y = np.array([0, 1, 0, 1], "float32")
    loader = md.data.Dataset.from_tensor_slices((x, y))
    batches = list(loader.map(train_preprocessing).batch(2).prefetch(2))
    volumes = np.concatenate([np.asarray(v) for v, _ in batches])
    want = np.clip(np.rot90(x, k=1, axes=(1, 2)), 0, 1)[..., None]
    np.testing.assert_array_equal(volumes, want)
    assert batches[0][0].dtype == torch.float32 and tuple(batches[0][0].shape) == (2, 3, 3, 2, 1)


@pytest.mark.parametrize("tout", [[md.float32, md.int64], (md.float32, md.int64), ["float32", "int64"]])
def test_several_outputs(tout):
    a, n = md.numpy_function(lambda v, k: (v + 1, k * 2), [md.constant([1.0, 2.0]), np.int64(3)], tout,
                             stateful=False, name="two")
    assert a.dtype == torch.float32 and a.tolist() == [2.0, 3.0]
    assert n.dtype == torch.int64 and int(n) == 6


def test_one_output_in_a_list():
    out = md.numpy_function(lambda v: v, [md.constant([1.0])], [md.float32])
    assert isinstance(out, list) and len(out) == 1 and out[0].tolist() == [1.0]


def test_python_numbers_as_numpy_makes_them():
    assert int(md.numpy_function(lambda v: v.shape[0], [md.constant([1.0, 2.0])], md.int64)) == 2
    assert float(md.numpy_function(lambda: 3.0, [], md.float64)) == 3.0


@pytest.mark.parametrize("fn,tout,got", [(lambda v: v.astype("float64"), md.float32, "float64"),
                                         (lambda v: 3.0, md.float32, "float64"),
                                         (lambda v: v.shape[0], md.int32, "int64")])
def test_another_dtype_is_refused_naming_both(fn, tout, got):
    with pytest.raises(md.errors.InvalidArgumentError, match=f"0-th value .* is {got}, but Tout expects"):
        md.numpy_function(fn, [md.constant([1.0, 2.0])], tout)


def test_wrong_count_of_outputs():
    with pytest.raises(md.errors.InvalidArgumentError, match="returned 3 values, but Tout has 2"):
        md.numpy_function(lambda v: (v, v, v), [md.constant([1.0])], [md.float32, md.float32])


def test_py_function_gets_tensors_and_converts_numbers():
    seen = []

    def f(v):
        seen.append(type(v))
        return v * 2, 3

    a, b = md.py_function(f, [np.array([1.0, 2.0], "float32")], [md.float32, md.float32])
    assert issubclass(seen[0], torch.Tensor)
    assert a.tolist() == [2.0, 4.0] and b.dtype == torch.float32 and float(b) == 3.0
    with pytest.raises(md.errors.InvalidArgumentError, match="float64.*Tout expects float32"):
        md.py_function(lambda v: v.double(), [md.constant([1.0])], md.float32)
