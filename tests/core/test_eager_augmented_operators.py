"""``x += y`` on a result a TF program holds binds a new tensor, as on TensorFlow's immutable tensors:
another name for the old value (a list entry, the loss a metric was given) keeps it."""

import torch

import multidev as md


def test_augmented_assignment_on_a_readable_result_leaves_other_names_alone():
    w = md.Variable([1.0, 2.0])
    with md.GradientTape() as tape:
        loss = md.reduce_sum(w * w)          # readable: it requires grad
        kept = loss
        loss += md.reduce_sum(w)             # the guides' `loss_value += sum(model.losses)`
        loss *= 2.0
    assert float(kept) == 5.0 and float(loss) == 16.0
    assert tape.gradient(loss, w).tolist() == [6.0, 10.0]   # d(2 (w.w + sum w)) = 4w + 2


def test_every_augmented_operator_gives_the_plain_operator_result():
    w = md.Variable([3.0, 4.0])
    base = w * 1.0
    for op, plain in (("__iadd__", "__add__"), ("__isub__", "__sub__"), ("__imul__", "__mul__"),
                      ("__itruediv__", "__truediv__"), ("__ifloordiv__", "__floordiv__"), ("__imod__", "__mod__"),
                      ("__ipow__", "__pow__")):
        out = getattr(base, op)(2.0)
        assert out is not base and out.tolist() == getattr(torch.Tensor, plain)(base.detach(), 2.0).tolist(), op
    assert base.tolist() == [3.0, 4.0]
