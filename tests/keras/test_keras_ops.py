"""``md.keras.ops.X`` against Keras 3's own ``keras.ops.X`` (torch backend) on the same inputs: values and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from multidev.keras import ops
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

_g = torch.Generator().manual_seed(0)
X = torch.randn(3, 4, generator=_g)
P = torch.rand(3, 4, generator=_g) + 0.1
I = torch.randint(-3, 5, (3, 4), generator=_g, dtype=torch.int32)
L = torch.randint(-3, 5, (6,), generator=_g)          # int64
B = X > 0
IMG = torch.rand(2, 5, 6, 3, generator=_g)
LABELS = torch.tensor([0, 3, 1])
ONE_HOT = torch.nn.functional.one_hot(LABELS, 4).float()

CASES = [  # (op name, args, kwargs); args are rebuilt per call so no op sees another's in-place change
    ("convert_to_tensor", ([1, 2],), {}), ("convert_to_tensor", ([1.5, 2],), {}),
    ("convert_to_tensor", (np.arange(3),), {}), ("convert_to_tensor", (np.ones(2),), {}),
    ("convert_to_tensor", (3,), {}), ("convert_to_tensor", (np.float64(2.5),), {}),
    ("convert_to_tensor", ([True, False],), {}), ("convert_to_tensor", ([1, 2],), {"dtype": "float32"}),
    ("cast", (X, "int32"), {}), ("cast", (I, "float32"), {}), ("cast", (X, "float16"), {}),
    ("matmul", (X, X.T), {}), ("reshape", (X, (2, -1)), {}), ("reshape", (X, [12]), {}),
    ("transpose", (X,), {}), ("transpose", (IMG, (0, 3, 1, 2)), {}),
    ("concatenate", ([X, X],), {"axis": 1}), ("concatenate", ([X, X],), {}), ("stack", ([X, X],), {"axis": 1}),
    ("expand_dims", (X, 1), {}), ("expand_dims", (X, -1), {}), ("squeeze", (X[:1],), {}),
    ("squeeze", (X[:, :1], 1), {}), ("sum", (X,), {}), ("sum", (X, 1), {"keepdims": True}), ("sum", (B,), {}),
    ("sum", (I, (0, 1)), {}), ("mean", (X, 0), {}), ("mean", (I,), {}), ("max", (X, -1), {}), ("max", (I,), {}),
    ("min", (X, 0), {"keepdims": True}), ("argmax", (X,), {}), ("argmax", (X, -1), {}),
    ("argmin", (X, 0), {}), ("sqrt", (P,), {}), ("sqrt", (I.abs(),), {}), ("square", (I,), {}),
    ("square", (X,), {}), ("exp", (X,), {}), ("exp", (I,), {}), ("log", (P,), {}), ("abs", (I,), {}),
    ("abs", (X,), {}), ("softmax", (X,), {}), ("softmax", (X, 0), {}), ("relu", (X,), {}), ("relu", (I,), {}),
    ("sigmoid", (X,), {}), ("gelu", (X,), {}), ("gelu", (X,), {"approximate": False}), ("log_softmax", (X,), {}),
    ("silu", (X,), {}), ("leaky_relu", (X,), {}), ("softplus", (X,), {}), ("elu", (X,), {}), ("tanh", (X,), {}),
    ("arange", (5,), {}), ("arange", (1, 7, 2), {}), ("arange", (0, 1, 0.25), {}),
    ("arange", (4,), {"dtype": "float32"}), ("ones", ((2, 3),), {}), ("zeros", ((2,),), {}),
    ("ones", ((2,),), {"dtype": "int32"}), ("ones_like", (I,), {}), ("zeros_like", (X,), {}),
    ("zeros_like", (X,), {"dtype": "int32"}), ("full", ((2, 2), 7), {}), ("full_like", (X, 2.0), {}),
    ("where", (B, X, -X), {}), ("where", (B, X, 0.0), {}), ("where", (B,), {}), ("clip", (X, -0.5, 0.5), {}),
    ("clip", (I, 0, 2), {}), ("top_k", (X, 2), {}), ("one_hot", (LABELS, 4), {}),
    ("one_hot", (LABELS, 4), {"axis": 0}), ("einsum", ("ij,kj->ik", X, X), {}),
    ("einsum", ("bij->bji", IMG[..., 0]), {}), ("shape", (IMG,), {}),
    ("add", (X, 1), {}), ("add", (I, 1.5), {}), ("subtract", (X, X), {}), ("multiply", (X, 2), {}),
    ("divide", (I, 2), {}), ("divide", (X, P), {}), ("power", (P, 2), {}), ("maximum", (X, 0.0), {}),
    ("maximum", (I, 1), {}), ("minimum", (X, P), {}), ("equal", (I, 1), {}), ("not_equal", (I, I), {}),
    ("greater", (X, 0), {}), ("less_equal", (X, P), {}), ("logical_and", (B, ~B), {}),
    ("logical_not", (B,), {}), ("floor", (X,), {}), ("round", (X * 3,), {}), ("sign", (X,), {}),
    ("std", (X, 1), {}), ("var", (X,), {}), ("prod", (P, 0), {}), ("cumsum", (X, 1), {}), ("cumsum", (I,), {}),
    ("any", (B, 1), {}), ("all", (B,), {}), ("count_nonzero", (I,), {}), ("norm", (X,), {}),
    ("norm", (X,), {"axis": -1}), ("logsumexp", (X, 1), {}), ("sort", (X,), {}), ("argsort", (L,), {}),
    ("tile", (X, (2, 1)), {}), ("repeat", (X, 2), {"axis": 0}), ("repeat", (L, 2), {}),
    ("split", (X, 2), {"axis": 1}), ("split", (L, [2, 3]), {}), ("take", (X, torch.tensor([2, 0])), {"axis": 0}),
    ("take", (X, torch.tensor([[1, 5]])), {}), ("take_along_axis", (X, torch.argsort(X, 1)), {"axis": 1}),
    ("pad", (X, ((1, 0), (0, 2))), {}), ("flip", (X, 1), {}), ("roll", (L, 2), {}), ("swapaxes", (IMG, 1, 2), {}),
    ("moveaxis", (IMG, -1, 1), {}), ("tril", (X,), {}), ("triu", (X, 1), {}), ("eye", (3,), {}), ("eye", (2, 4), {"k": 1}), ("eye", (3,), {"k": -1}),
    ("eye", (2, 3), {"k": 5}), ("pad", (IMG[0, :, :, 0], ((1, 2), (2, 1))), {"mode": "reflect"}),
    ("linspace", (0, 1, 5), {}), ("dot", (X, X.T), {}), ("dot", (X, X[0]), {}), ("tensordot", (X, X, ([1], [1])), {}),
    ("outer", (L, L), {}), ("isnan", (X,), {}), ("nan_to_num", (torch.tensor([float("nan"), 1.0]),), {}),
    ("rsqrt", (P,), {}), ("erf", (X,), {}), ("floor_divide", (I, 2), {}), ("mod", (I, 3), {}),
    ("moments", (X, [0]), {}), ("moments", (X, [0, 1]), {"keepdims": True}), ("normalize", (X,), {}),
    ("in_top_k", (LABELS, X, 2), {}), ("segment_sum", (X, torch.tensor([0, 0, 2])), {}),
    ("segment_max", (X, torch.tensor([1, 0, 1])), {}), ("stop_gradient", (X,), {}),
    ("categorical_crossentropy", (ONE_HOT, P), {}), ("categorical_crossentropy", (ONE_HOT, X), {"from_logits": True}),
    ("sparse_categorical_crossentropy", (LABELS, P), {}),
    ("sparse_categorical_crossentropy", (LABELS, X), {"from_logits": True}),
    ("binary_crossentropy", (B.float(), torch.sigmoid(X)), {}),
    ("binary_crossentropy", (B.float(), X), {"from_logits": True}), ("multi_hot", (torch.tensor([[0, 2], [1, 1]]), 3), {}),
    ("average", (X,), {"axis": 1, "weights": torch.tensor([1.0, 2.0, 3.0, 4.0])}),
    ("slice", (X, (1, 1), (2, 2)), {}), ("slice_update", (X, (1, 1), torch.ones(2, 2)), {}),
    ("scatter", (torch.tensor([[0, 1], [2, 3], [0, 1]]), torch.tensor([1.0, 2.0, 3.0]), (3, 4)), {}),
    ("unstack", (X,), {}), ("size", (X,), {}), ("dtype", (I,), {}),
]


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in _flat(item)]
    return [value]


def _same(ours, theirs, label):
    ours, theirs = _flat(ours), _flat(theirs)
    assert len(ours) == len(theirs), label
    for a, b in zip(ours, theirs):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{label}: {type(a)} is not a tensor"
            assert a.dtype == b.dtype, f"{label}: dtype {a.dtype} != Keras's {b.dtype}"
            torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-6, atol=1e-6, msg=lambda m: f"{label}: {m}")
        else:
            assert a == b, f"{label}: {a!r} != Keras's {b!r}"


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_equals_keras3(name, args, kwargs):
    ours = getattr(ops, name)(*args, **kwargs)
    theirs = getattr(keras.ops, name)(*args, **kwargs)
    _same(ours, theirs, f"ops.{name}{args!r:.60}")


@pytest.mark.parametrize("kwargs", [{}, {"interpolation": "nearest"}, {"interpolation": "bicubic"},
                                    {"antialias": True}])
def test_image_resize_equals_keras3(kwargs):
    for size in [(3, 4), (10, 12)]:
        _same(ops.image.resize(IMG, size, **kwargs), keras.ops.image.resize(IMG, size, **kwargs), f"resize {kwargs}")
    _same(ops.image.resize(IMG[0], (2, 3)), keras.ops.image.resize(IMG[0], (2, 3)), "resize one image")


def test_ops_run_inside_autograd_and_keep_gradients():
    x = X.clone().requires_grad_()
    loss = ops.mean(ops.square(ops.softmax(ops.matmul(x, ops.transpose(x))) - 0.1))
    loss.backward()
    expected = X.clone().requires_grad_()
    keras.ops.mean(keras.ops.square(keras.ops.softmax(keras.ops.matmul(expected, keras.ops.transpose(expected)))
                                    - 0.1)).backward()
    torch.testing.assert_close(x.grad, expected.grad)


def test_one_hot_of_ids_outside_the_range_is_zero_as_tensorflow():
    # Keras 3 on torch raises here; TensorFlow and Keras 3 on JAX give zero vectors, as md.keras does.
    torch.testing.assert_close(ops.one_hot(torch.tensor([1, 5, -1]), 3),
                               torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))


def test_bad_arguments_raise_keras_errors():
    with pytest.raises(ValueError, match="interpolation"):
        ops.image.resize(IMG, (2, 2), interpolation="cubic")
    with pytest.raises(ValueError, match="both be given"):
        ops.where(B, X)
    with pytest.raises(ValueError, match="length is not 1"):
        ops.squeeze(X, 0)
