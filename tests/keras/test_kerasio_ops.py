"""Ops of the keras.io programs (tests/programs/keras p51+) on md.keras: ``ctc_loss``/``ctc_decode`` and
``losses.CTC`` against Keras 3's own (torch backend) on the same inputs (captcha OCR), their gradients, the refusal
of beam search; ``tensordot`` with a pair of axes (PointNet) and ``repeat`` with a list of counts (conditional GAN)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from multidev.keras import losses, ops
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

_g = torch.Generator().manual_seed(0)
LOGITS = torch.randn(4, 9, 6, generator=_g)
LABELS = torch.tensor([[1, 2, 2], [3, 4, 0], [5, 1, 3], [2, 0, 0]])
LABEL_LENGTHS = torch.tensor([3, 2, 3, 1])
STEPS = torch.tensor([9, 7, 9, 4], dtype=torch.int32)


def _close(ours, theirs):
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_index", [0, 5])
def test_ctc_loss_equals_keras3_with_its_gradient(mask_index):
    labels = torch.where(LABELS == mask_index, 1, LABELS) if mask_index else LABELS
    ours_x, theirs_x = LOGITS.clone().requires_grad_(), LOGITS.clone().requires_grad_()
    ours = ops.ctc_loss(labels, ours_x, LABEL_LENGTHS, STEPS, mask_index=mask_index)
    theirs = keras.ops.ctc_loss(labels, theirs_x, LABEL_LENGTHS, STEPS, mask_index=mask_index)
    _close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    torch.testing.assert_close(ours_x.grad, theirs_x.grad, rtol=1e-5, atol=1e-6)
    assert ops.nn.ctc_loss is ops.ctc_loss   # keras.ops.nn.ctc_loss too


def test_ctc_loss_takes_numpy_and_lists_as_keras3():
    ours = ops.ctc_loss(LABELS.numpy(), LOGITS.numpy(), LABEL_LENGTHS.tolist(), STEPS.numpy())
    _close(ours, keras.ops.ctc_loss(LABELS.numpy(), LOGITS.numpy(), LABEL_LENGTHS.tolist(), STEPS.numpy()))


@pytest.mark.parametrize("kwargs", [{}, {"merge_repeated": False}, {"mask_index": None}, {"mask_index": 3}])
def test_greedy_ctc_decode_equals_keras3(kwargs):
    probs = torch.softmax(LOGITS, dim=-1)
    probs[0, 1:4] = torch.nn.functional.one_hot(torch.tensor(2), 6).float()   # a repeated class to merge
    ours, theirs = ops.ctc_decode(probs, STEPS, **kwargs), keras.ops.ctc_decode(probs, STEPS, **kwargs)
    assert len(ours) == len(theirs) == 2
    _close(ours[0], theirs[0])
    _close(ours[1], theirs[1])
    assert ours[0].shape == (1, 4, 9)


def test_ctc_loss_class_equals_keras3():
    for reduction in ("sum_over_batch_size", "none"):
        _close(losses.CTC(reduction=reduction)(LABELS, LOGITS), keras.losses.CTC(reduction=reduction)(LABELS, LOGITS))
    _close(losses.ctc(LABELS, LOGITS), keras.losses.ctc(LABELS, LOGITS))
    with pytest.raises(ValueError, match=r"y_true.shape=\(4,\)"):
        losses.ctc(LABELS[:, 0], LOGITS)


def test_beam_search_is_refused_with_the_way_out():
    with pytest.raises(NotImplementedError, match="strategy='greedy' only.*Keras 3 on multidev"):
        ops.ctc_decode(LOGITS, STEPS, strategy="beam_search")
    with pytest.raises(ValueError, match="'greedy' and 'beam_search'"):
        ops.ctc_decode(LOGITS, STEPS, strategy="best")


def test_tensordot_takes_a_pair_of_axes_as_keras3():
    # keras.io's PointNet OrthogonalRegularizer: ops.tensordot(x, x, axes=(2, 2))
    x = torch.randn(3, 4, 4, generator=_g)
    _close(ops.tensordot(x, x, axes=(2, 2)), keras.ops.tensordot(x, x, axes=(2, 2)))
    _close(ops.tensordot(x, x, axes=([1, 2], (1, 2))), keras.ops.tensordot(x, x, axes=([1, 2], (1, 2))))


@pytest.mark.parametrize("repeats,axis", [([4], None), (3, None), ([2], 1), (torch.tensor([1, 2, 0]), 0),
                                          (np.array([2]), None), ([1, 0, 2], 0)])
def test_repeat_takes_counts_as_numpy(repeats, axis):
    # keras.io's conditional GAN: ops.repeat(one_hot_labels[:, :, None, None], repeats=[image_size * image_size]);
    # TensorFlow's Keras 3 takes a list as numpy does (Keras 3 on torch raises "Invalid dtype: object")
    x = torch.randn(3, 2, generator=_g)
    counts = repeats.numpy() if isinstance(repeats, torch.Tensor) else repeats
    np.testing.assert_array_equal(ops.repeat(x, repeats, axis=axis).numpy(), np.repeat(x.numpy(), counts, axis=axis))
