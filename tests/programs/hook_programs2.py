"""Custom autograd and activation checkpointing as public programs write them, ported with two lines:

* DANN's gradient reversal layer (``GradReverse.apply(x, alpha)``, ``ctx.alpha``, ``grad.neg() * ctx.alpha``)
  between a feature extractor and a domain classifier, also with the features' gradient norm logged by
  ``f.register_hook(lambda grad: grad_norms.append(grad.norm()))`` into one list;
* a binarised net's straight-through estimator (``sign`` forward, ``grad * (|x| <= 1)`` backward from
  ``ctx.save_for_backward``);
* a Function returning its ``argmax`` marked with ``ctx.mark_non_differentiable`` and a backward under
  ``@once_differentiable``;
* ``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`` (and ``True``) over a block with dropout.

``case(port) -> dict`` as in ``hook_programs.py``; imports only torch.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.autograd.function import once_differentiable
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from hook_programs import CLASSES, DIM, data, mlp, train


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class DANN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(DIM, 8), nn.ReLU())
        self.classifier = nn.Linear(8, CLASSES)
        self.domain = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x, alpha, grad_log=None):
        f = self.features(x)
        if grad_log is not None:   # the reversed gradient's norm, logged by a tensor hook
            f.register_hook(lambda grad: grad_log.append(grad.norm()))
        return self.classifier(f), self.domain(GradReverse.apply(f, alpha))


def dann_gradient_reversal(port, log_reversed: bool = False) -> dict:
    torch.manual_seed(81)
    with port.scope():
        model = DANN().double()
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)

    def loss_fn(x, y):
        domain = (x[:, 0] > 0).long()   # source / target by the first feature
        class_out, domain_out = model(x, 0.5, grad_norms if log_reversed else None)
        return F.cross_entropy(class_out, y) + F.cross_entropy(domain_out, domain)

    grad_norms = []
    result = train(port, model, optimizer, loss_fn, data(82))
    return {**result, "norms": [float(n) for n in grad_norms]} if log_reversed else result


def dann_reversed_gradient_logged(port) -> dict:
    return dann_gradient_reversal(port, log_reversed=True)


class BinarizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.sign()

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * (input.abs() <= 1).to(grad_output.dtype)


class BinaryLinear(nn.Linear):
    def forward(self, input):
        return F.linear(input, BinarizeSTE.apply(self.weight), self.bias)


def straight_through_binary(port) -> dict:
    torch.manual_seed(91)
    with port.scope():
        model = nn.Sequential(BinaryLinear(DIM, 8), nn.BatchNorm1d(8), nn.Hardtanh(), nn.Linear(8, CLASSES)).double()
        optimizer = optim.Adam(model.parameters(), lr=0.01)
    model = port.wrap(model)
    return train(port, model, optimizer, lambda x, y: F.cross_entropy(model(x), y), data(92))


class MaxWithIndex(torch.autograd.Function):
    """Row max and its index: the index is not differentiable; the backward scatters into the max's place."""

    @staticmethod
    def forward(ctx, input):
        value, index = input.max(dim=1)
        ctx.mark_non_differentiable(index)
        ctx.save_for_backward(index)
        ctx.shape = input.shape
        return value, index

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value, grad_index):
        index, = ctx.saved_tensors
        grad = grad_value.new_zeros(ctx.shape)
        grad.scatter_(1, index[:, None], grad_value[:, None])
        return grad


def non_differentiable_output(port) -> dict:
    with port.scope():
        model = mlp(101, hidden=8)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    model = port.wrap(model)

    def loss_fn(x, y):
        logits = model(x)
        top, index = MaxWithIndex.apply(logits)
        hit = (index == y).to(logits.dtype)
        return F.cross_entropy(logits, y) + 0.1 * (top * (1 - hit)).mean()

    return train(port, model, optimizer, loss_fn, data(102))


class CheckpointedNet(nn.Module):
    def __init__(self, use_reentrant: bool):
        super().__init__()
        self.use_reentrant = use_reentrant
        self.block = nn.Sequential(nn.Linear(DIM, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        if self.use_reentrant:
            x = x.requires_grad_()   # reentrant checkpoint needs an input that requires grad
        return self.head(checkpoint(self.block, x, use_reentrant=self.use_reentrant))


def _checkpointed(port, use_reentrant: bool) -> dict:
    torch.manual_seed(111)
    with port.scope():
        model = CheckpointedNet(use_reentrant).double()
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    model = port.wrap(model)
    return train(port, model, optimizer, lambda x, y: F.cross_entropy(model(x), y), data(112))


def checkpoint_dropout(port) -> dict:
    return _checkpointed(port, use_reentrant=False)


def checkpoint_dropout_reentrant(port) -> dict:
    return _checkpointed(port, use_reentrant=True)


HOOKS2 = {f.__name__: f for f in (
    dann_gradient_reversal, dann_reversed_gradient_logged, straight_through_binary, non_differentiable_output,
    checkpoint_dropout, checkpoint_dropout_reentrant)}
