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
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn, optim

from loss_programs import GLOBAL_BATCH, features, loader


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
