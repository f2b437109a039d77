"""Barlow Twins' loss (facebookresearch/barlowtwins ``main.py``) as printed: the cross-correlation matrix of the
batch-normalised embeddings, summed over the ranks with ``torch.distributed.all_reduce(c)`` in ``forward``.
Autograd does not see that all-reduce, so under DDP each rank's gradient flows through its own ``c`` unreduced
(the identity), and DDP then averages the ranks' parameter gradients.

* ``barlow_twins_as_printed``: ``torch.distributed.all_reduce(c)`` in the step (refused in ``strategy.run``);
* ``barlow_twins_passthrough``: the port of it, ``c = ctx.all_reduce('sum', c.detach()) + (c - c.detach())``
  (DDP: as printed);
* ``barlow_twins_differentiable``: ``c = ctx.all_reduce('sum', c)``, differentiable (TensorFlow's: the gradient is
  all-reduced too), DDP's ``torch.distributed.nn.functional.all_reduce(c)``: the gradient is the world size times
  the printed program's.

And a loss with running class counts in a buffer (mmdetection's ``SeesawLoss``: ``cum_samples`` grown in
``forward`` from the batch's labels, read back as class weights), kept in the model as mmdetection keeps it: each
DDP rank's forward starts from rank 0's counts (``broadcast_buffers``); multidev refuses the per-replica counts;
the counts summed over the ranks (``dist.all_reduce``; the port's replica all-reduce) train alike.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn import functional as F

from loss_programs import GLOBAL_BATCH, features, labels, loader


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self, reduce, lambd=0.0051, batch_size=GLOBAL_BATCH):
        super().__init__()
        self.reduce, self.lambd, self.batch_size = reduce, lambd, batch_size
        self.backbone = nn.Sequential(nn.Linear(5, 8), nn.ReLU())
        self.projector = nn.Sequential(nn.Linear(8, 6, bias=False), nn.BatchNorm1d(6), nn.ReLU(),
                                       nn.Linear(6, 4, bias=False))
        self.bn = nn.BatchNorm1d(4, affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        # empirical cross-correlation matrix
        c = self.bn(z1).T @ self.bn(z2)
        # sum the cross-correlation matrix between all gpus
        c.div_(self.batch_size)
        c = self.reduce(c)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + self.lambd * off_diag


def _in_place_all_reduce(c):
    dist.all_reduce(c)
    return c


def _barlow(port, reduce) -> dict:
    torch.manual_seed(60)
    with port.scope():
        model = BarlowTwins(reduce).double()
        optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    model = port.wrap(model)
    x = features(61)
    data = loader(x + 0.2 * features(62), x + 0.2 * features(63))

    def step(y1, y2):
        loss = model(y1, y2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(data)]
    return {**port.weights(model), "log": log}


def barlow_twins_as_printed(port) -> dict:
    return _barlow(port, _in_place_all_reduce)


def barlow_twins_passthrough(port) -> dict:
    return _barlow(port, port.all_reduce_passthrough)


def barlow_twins_differentiable(port) -> dict:
    return _barlow(port, port.all_reduce_grad)


class CountedCE(nn.Module):
    """Cross-entropy weighted down for frequent classes by the counts seen so far (Seesaw's mitigation factor)."""

    def __init__(self, num_classes=3, p=0.8, reduce=None):
        super().__init__()
        self.p, self.reduce = p, reduce
        self.register_buffer("cum_samples", torch.zeros(num_classes))

    def forward(self, cls_score, labels):
        counts = F.one_hot(labels, self.cum_samples.numel()).sum(0).to(self.cum_samples.dtype)
        if self.reduce is not None:
            counts = self.reduce(counts)
        self.cum_samples += counts
        seen = self.cum_samples.clamp(min=1)
        return F.cross_entropy(cls_score, labels, weight=(seen / seen.max()) ** -self.p)


class Head(nn.Module):
    def __init__(self, reduce):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
        self.loss_cls = CountedCE(reduce=reduce)

    def forward(self, x, y):
        return self.loss_cls(self.fc(x), y)


def _counted(port, reduce) -> dict:
    torch.manual_seed(64)
    with port.scope():
        model = Head(reduce).double()
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)
    y = labels(66, 3)
    y[:GLOBAL_BATCH // 2] = 0   # replica 0's first shard: one class only

    def step(x, y):
        loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(loader(features(65), y))]
    return {**port.weights(model), **port.buffers(model), "log": log}


def counted_ce_per_replica(port) -> dict:
    return _counted(port, None)


def counted_ce_summed(port) -> dict:
    """``dist.all_reduce(counts)`` before ``cum_samples += counts`` (``port.all_reduce_``)."""
    return _counted(port, port.all_reduce_)
