"""md.constant, md.reduce_sum, md.reduce_mean, md.add_n: TensorFlow's results and errors."""

from __future__ import annotations

import pytest
import torch

import multidev as md


def test_constant_dtypes_and_shapes():
    assert md.constant(1).dtype == torch.int32 and md.constant(1.5).dtype == torch.float32     # TF's defaults
    assert md.constant([1, 2], dtype="float64").dtype == torch.float64
    assert md.constant(torch.tensor([1, 2])).dtype == torch.int64                              # tensors keep theirs
    assert md.constant(7.0, shape=[2, 3]).tolist() == [[7.0] * 3] * 2
    assert md.constant([1, 2, 3, 4], shape=(2, 2)).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match=r"has 3 elements, but got `shape` \(2, 2\) with 4 elements"):
        md.constant([1, 2, 3], shape=(2, 2))
    with pytest.raises(TypeError, match="Unknown dtype 'float99'"):
        md.constant(1, dtype="float99")


def test_constant_is_a_copy():
    t = torch.zeros(2)
    c = md.constant(t)
    t.add_(1)
    assert c.tolist() == [0.0, 0.0]


def test_reduce_sum_axes_and_keepdims():
    x = md.constant([[1, 1, 1], [1, 1, 1]])
    assert md.reduce_sum(x).item() == 6 and md.reduce_sum(x).dtype == torch.int32
    assert md.reduce_sum(x, 0).tolist() == [2, 2, 2]
    assert md.reduce_sum(x, 1).tolist() == [3, 3]
    assert md.reduce_sum(x, 1, keepdims=True).tolist() == [[3], [3]]
    assert md.reduce_sum(x, [0, 1]).item() == 6 and md.reduce_sum(x, -1).tolist() == [3, 3]
    assert md.reduce_sum(x, keepdims=True).shape == (1, 1)
    assert md.reduce_sum(x, axis=[]).tolist() == x.tolist()
    with pytest.raises(md.errors.InvalidArgumentError, match=r"Invalid reduction dimension 2 .*\[-2, 2\)"):
        md.reduce_sum(x, axis=2)


def test_reduce_mean_float_and_integer():
    x = md.constant([[1.0, 1.0], [2.0, 2.0]])
    assert md.reduce_mean(x).item() == 1.5
    assert md.reduce_mean(x, 0).tolist() == [1.5, 1.5] and md.reduce_mean(x, 1).tolist() == [1.0, 2.0]
    assert md.reduce_mean(x, 1, keepdims=True).shape == (2, 1)
    ints = md.constant([1, 2])
    assert md.reduce_mean(ints).item() == 1 and md.reduce_mean(ints).dtype == torch.int32    # TF truncates
    assert md.reduce_mean(md.constant([-1, -2])).item() == -1


def test_reduce_ops_keep_gradients():
    w = torch.ones(3, requires_grad=True)
    md.reduce_mean(w * 2.0).backward()
    assert w.grad.tolist() == pytest.approx([2 / 3] * 3)


def test_add_n():
    a, b = md.constant([1.0, 2.0]), md.constant([3.0, 4.0])
    assert md.add_n([a, b, a]).tolist() == [5.0, 8.0]
    assert md.add_n([a]).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="at least one Tensor"):
        md.add_n([])
    with pytest.raises(ValueError, match=r"input 1 is torch.float32 \(3,\)"):
        md.add_n([a, md.constant([1.0, 2.0, 3.0])])
