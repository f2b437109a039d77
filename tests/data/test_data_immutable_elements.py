"""A TF program's functions see immutable tensors: ``image /= 255`` in a ``map`` (TensorFlow's "Distributed
training with Keras" tutorial's ``scale``) binds a new tensor, as in TensorFlow; torch's in-place division
wrote the dataset's source, the program's own numpy array, again on every pass."""

import numpy as np
import torch

import multidev as md

D = md.data.Dataset


def scale(image, label):
    image = md.cast(image, md.float32)   # the same tensor when it is float32 already
    image /= 255
    return image, label


def test_in_place_operators_in_map_leave_the_source_and_each_pass_alike():
    images = np.full((4, 2), 255.0, "float32")
    ds = D.from_tensor_slices((images, np.arange(4))).map(scale)
    first = [x.tolist() for x, _ in ds]
    second = [x.tolist() for x, _ in ds]
    assert first == second == [[1.0, 1.0]] * 4
    assert (images == 255.0).all()                    # the program's array is untouched


def test_every_augmented_operator_and_every_function_taking_elements():
    source = torch.arange(1, 7, dtype=torch.float32).reshape(3, 2)

    def ops(x):
        x += 1
        x -= 0.5
        x *= 2
        x //= 1
        x **= 1
        x %= 100
        return x

    assert [v.tolist() for v in D.from_tensors(source).map(ops)] == [[[3.0, 5.0], [7.0, 9.0], [11.0, 13.0]]]
    assert source.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    dicts = D.from_tensor_slices({"a": source}).map(lambda d: {"a": ops(d["a"])})
    assert [d["a"].tolist() for d in dicts.batch(3)] == [[[3.0, 5.0], [7.0, 9.0], [11.0, 13.0]]]

    def keep(x):
        x *= 0
        return True
    assert [v.tolist() for v in D.from_tensor_slices(source).filter(keep)] == source.tolist()
    flat = D.from_tensor_slices(source).flat_map(lambda x: D.from_tensors(ops(x)))
    assert len(list(flat)) == 3 and source.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


def test_map_outputs_are_plain_tensors_and_bool_tensors_combine():
    out = next(iter(D.from_tensor_slices(torch.tensor([[True, False]])).map(lambda m: m & torch.tensor([True, True]))))
    assert type(out) is torch.Tensor and out.tolist() == [True, False]
    mask = torch.tensor([True, False])
    out = next(iter(D.from_tensors(mask).map(lambda m: _or_in_place(m))))
    assert out.tolist() == [True, True] and mask.tolist() == [True, False]


def _or_in_place(m):
    m |= torch.tensor([False, True])
    return m
