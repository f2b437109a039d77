"""Multi-task losses as DDP programs write them (see ``loss_programs.py``): a model returning a dict of outputs, a
criterion returning a dict of losses the program sums (``sum(loss_dict.values())``, torchvision's detection
recipe), and Kendall et al.'s uncertainty weighting with learnable ``log_vars``:

* ``log_vars`` in a ``MultiTaskLoss`` module (DDP: wrapped too, ``DDP(MultiTaskLoss(2))``);
* the same module not wrapped by DDP (its gradient is not reduced: DDP's ranks drift apart);
* ``log_vars = nn.Parameter(torch.zeros(2))`` free-standing in the optimizer (DDP's ranks drift apart).
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F

from loss_programs import F64, features, labels, loader


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(5, 8), nn.Tanh())
        self.cls = nn.Linear(8, 3)
        self.reg = nn.Linear(8, 1)

    def forward(self, x):
        h = self.trunk(x)
        return {"cls": self.cls(h), "reg": self.reg(h).squeeze(1)}


def criterion(outputs: dict, y: torch.Tensor, z: torch.Tensor) -> dict:
    return {"loss_cls": F.cross_entropy(outputs["cls"], y), "loss_reg": F.mse_loss(outputs["reg"], z)}


class MultiTaskLoss(nn.Module):
    """Kendall, Gal and Cipolla's weighting: ``sum(exp(-s_i) * L_i + s_i)``, ``s_i = log sigma_i^2`` learnt."""

    def __init__(self, num_tasks: int):
        super().__init__()
        self.log_vars = nn.Parameter(torch.zeros(num_tasks))

    def forward(self, losses):
        return sum(torch.exp(-s) * loss + s for s, loss in zip(self.log_vars, losses))


def _data():
    return loader(features(40), labels(41, 3), 3 * features(42, width=1).squeeze(1))


def _loop(port, model, weigh, optimizer, extra) -> dict:
    def step(x, y, z):
        loss_dict = criterion(model(x), y, z)
        weighted = weigh(list(loss_dict.values()))
        optimizer.zero_grad()
        weighted.backward()
        optimizer.step()
        return torch.stack([weighted.detach(), *[v.detach() for v in loss_dict.values()]])

    log = [port.means(port.run(step, args=b)) for b in port.distribute(_data())]
    return {**port.weights(model, *extra), "log": log}


def losses_dict_summed(port) -> dict:
    """``losses = sum(loss for loss in loss_dict.values())`` (no weights)."""
    torch.manual_seed(43)
    with port.scope():
        model = TwoHeads().double()
        optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model = port.wrap(model)
    return _loop(port, model, lambda losses: sum(losses), optimizer, ())


def kendall_loss_module(port) -> dict:
    """``MultiTaskLoss`` built with the model, its parameters in the optimizer (DDP wraps it as well)."""
    torch.manual_seed(44)
    with port.scope():
        model = TwoHeads().double()
        mtl = MultiTaskLoss(2).double()
        optimizer = optim.Adam(list(model.parameters()) + list(mtl.parameters()), lr=0.05)
    model, mtl = port.wrap(model), port.wrap(mtl)
    return _loop(port, model, mtl, optimizer, (mtl,))


def kendall_loss_module_not_wrapped(port) -> dict:
    """The same with ``MultiTaskLoss`` not wrapped by DDP: DDP's ranks update ``log_vars`` from their own
    halves; built in the strategy's scope it is mirrored and its gradient averaged (``kendall_loss_module``)."""
    torch.manual_seed(44)
    with port.scope():
        model = TwoHeads().double()
        mtl = MultiTaskLoss(2).double()
        optimizer = optim.Adam(list(model.parameters()) + list(mtl.parameters()), lr=0.05)
    model = port.wrap(model)
    return _loop(port, model, mtl, optimizer, (mtl,))


def kendall_free_parameter(port, make=lambda t: nn.Parameter(t)) -> dict:
    """``log_vars = nn.Parameter(torch.zeros(2))`` next to the model, in the optimizer's list."""
    torch.manual_seed(44)
    with port.scope():
        model = TwoHeads().double()
        log_vars = make(torch.zeros(2, dtype=F64))
        optimizer = optim.Adam(list(model.parameters()) + [log_vars], lr=0.05)
    model = port.wrap(model)

    def weigh(losses):
        return sum(torch.exp(-log_vars[i]) * loss + log_vars[i] for i, loss in enumerate(losses))
    out = _loop(port, model, weigh, optimizer, ())
    return {**out, **port.tensor_spread("log_vars", log_vars)}


def kendall_variable(port) -> dict:
    """The refusal's fix: ``log_vars = md.Variable(torch.zeros(2))`` in the scope (``port.variable``; DDP has no
    such thing: its reference is ``kendall_loss_module``)."""
    return kendall_free_parameter(port, port.variable)


# --- KaiyangZhou/pytorch-center-loss: a loss with its own parameters and optimizer ---------------------------
class CenterLoss(nn.Module):
    """Center loss (Wen et al., ECCV 2016), as the repository prints it (CPU)."""

    def __init__(self, num_classes=3, feat_dim=2):
        super(CenterLoss, self).__init__()
        self.num_classes, self.feat_dim = num_classes, feat_dim
        self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim))

    def forward(self, x, labels):
        batch_size = x.size(0)
        distmat = torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) + \
            torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes, batch_size).t()
        distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)
        classes = torch.arange(self.num_classes).long()
        labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
        mask = labels.eq(classes.expand(batch_size, self.num_classes))
        dist = distmat * mask.float()
        loss = dist.clamp(min=1e-12, max=1e+12).sum() / batch_size
        return loss


class FeatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
        self.fc = nn.Linear(2, 3)

    def forward(self, x):
        f = self.feat(x)
        return f, self.fc(f)


def center_loss(port) -> dict:
    """``main.py``'s step: two optimizers, ``param.grad.data *= (1. / weight_cent)`` on the centres between
    ``backward`` and ``optimizer_centloss.step()``; the step returns the loss undetached (DDP wraps both)."""
    weight_cent = 0.5
    torch.manual_seed(45)
    with port.scope():
        model = FeatNet().double()
        criterion_cent = CenterLoss().double()
        optimizer_model = optim.SGD(model.parameters(), lr=0.1, weight_decay=5e-04, momentum=0.9)
        optimizer_centloss = optim.SGD(criterion_cent.parameters(), lr=0.5)
    model, criterion_cent = port.wrap(model), port.wrap(criterion_cent)
    criterion_xent = nn.CrossEntropyLoss()

    def step(data, labels):
        features, outputs = model(data)
        loss_xent = criterion_xent(outputs, labels)
        loss_cent = criterion_cent(features, labels)
        loss_cent *= weight_cent
        loss = loss_xent + loss_cent
        optimizer_model.zero_grad()
        optimizer_centloss.zero_grad()
        loss.backward()
        optimizer_model.step()
        for param in criterion_cent.parameters():
            param.grad.data *= (1. / weight_cent)
        optimizer_centloss.step()
        return loss

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(loader(features(46), labels(47, 3)))]
    return {**port.weights(model, criterion_cent), "log": log}
