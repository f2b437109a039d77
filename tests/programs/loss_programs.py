"""torch.nn's losses as DDP programs write them, ported with two lines (model, criterion and optimizer built in
``strategy.scope()``, the step in ``strategy.run`` over ``experimental_distribute_dataset``):

* the loss zoo with ``reduction='mean'`` (and ``'sum'``): class-weighted ``NLLLoss`` / ``CrossEntropyLoss`` with
  ``ignore_index`` and ``label_smoothing`` (one step gives replica 1's shard only ignored tokens: its loss is
  ``nan`` and its gradient zero, on a DDP rank alike), ``BCEWithLogitsLoss(pos_weight=...)``,
  ``MultiLabelSoftMarginLoss(weight=...)``, ``HuberLoss``, ``PoissonNLLLoss``, ``GaussianNLLLoss``,
  ``KLDivLoss('batchmean')`` distillation, ``TripletMarginLoss``, ``CosineEmbeddingLoss``, ``MarginRankingLoss``
  and ``CTCLoss`` (its mean divides each sequence's loss by its target length; one target longer than its input
  is infinite, ``zero_infinity=True`` zeroes it);
* the criterion built in the scope (its ``weight`` / ``pos_weight`` buffers) or outside it (``.to(device)``).

Each is ``case(port) -> dict`` over ``loss_run``'s ports (a DDP rank, or a strategy's port). Float64, synthetic
seeded data, global batch 8. Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, FEATURES = 8, 3, 5


def loader(*tensors) -> DataLoader:
    return DataLoader(TensorDataset(*tensors), batch_size=GLOBAL_BATCH)


def features(seed: int, rows: int = STEPS * GLOBAL_BATCH, width: int = FEATURES) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(seed), dtype=F64)


def labels(seed: int, classes: int, rows: int = STEPS * GLOBAL_BATCH) -> torch.Tensor:
    return torch.randint(0, classes, (rows,), generator=torch.Generator().manual_seed(seed))


def net(out: int, width: int = FEATURES) -> nn.Module:
    return nn.Sequential(nn.Linear(width, 8), nn.Tanh(), nn.Linear(8, out)).double()


def train(port, out: int, make_criterion, data: DataLoader, loss_of, seed: int = 0, in_scope: bool = True,
          lr: float = 0.1) -> dict:
    """The common loop: ``model(x)``, ``loss_of(criterion, output, *rest)``, ``backward``, SGD with momentum."""
    torch.manual_seed(seed)
    with port.scope():
        model = net(out)
        optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        if in_scope:
            criterion = make_criterion()
    if not in_scope:   # built after the scope, moved as programs move it (`criterion.to(device)`)
        criterion = make_criterion().to(torch.device("cpu"))
    model = port.wrap(model)

    def step(x, *rest):
        optimizer.zero_grad()
        loss = loss_of(criterion, model(x), *rest)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(data)]
    return {**port.weights(model), "log": log}


CLASS_WEIGHT = (1.0, 2.0, 0.5)


def _ignored_targets() -> torch.Tensor:
    """Targets with some -100; step 2's second half (replica 1's shard) only -100."""
    y = labels(2, 3)
    y[::3] = -100
    y[GLOBAL_BATCH + GLOBAL_BATCH // 2:2 * GLOBAL_BATCH] = -100
    return y


def nll_class_weighted(port) -> dict:
    """``nn.NLLLoss(weight=...)`` on ``log_softmax``: the mean divides by the shard's summed class weights."""
    make = lambda: nn.NLLLoss(weight=torch.tensor(CLASS_WEIGHT, dtype=F64))  # noqa: E731
    return train(port, 3, make, loader(features(1), labels(2, 3)), lambda c, out, y: c(F.log_softmax(out, 1), y))


def _ce_ignore_smoothing(port, in_scope: bool) -> dict:
    make = lambda: nn.CrossEntropyLoss(weight=torch.tensor(CLASS_WEIGHT, dtype=F64), ignore_index=-100,  # noqa: E731
                                       label_smoothing=0.1)
    return train(port, 3, make, loader(features(3), _ignored_targets()), lambda c, out, y: c(out, y),
                 in_scope=in_scope)


def ce_weight_ignore_smoothing(port) -> dict:
    """Class weights, ``ignore_index=-100``, ``label_smoothing=0.1``; one step's replica-1 shard only ignored
    tokens: its loss ``nan`` (0 / 0), its gradient zero; the average of the two gradients is the update."""
    return _ce_ignore_smoothing(port, in_scope=True)


def ce_criterion_outside_scope(port) -> dict:
    """The same criterion built after the scope and moved with ``.to(device)``."""
    return _ce_ignore_smoothing(port, in_scope=False)


def bce_pos_weight(port) -> dict:
    """Multi-label ``BCEWithLogitsLoss(pos_weight=...)`` (one weight per label)."""
    y = (features(5, width=3) > 0.3).to(F64)
    make = lambda: nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0, 1.0, 0.5], dtype=F64))  # noqa: E731
    return train(port, 3, make, loader(features(4), y), lambda c, out, y: c(out, y))


def multilabel_soft_margin(port) -> dict:
    y = (features(7, width=3) > 0.0).to(F64)
    make = lambda: nn.MultiLabelSoftMarginLoss(weight=torch.tensor([1.0, 0.3, 2.0], dtype=F64))  # noqa: E731
    return train(port, 3, make, loader(features(6), y), lambda c, out, y: c(out, y))


def huber_mean(port) -> dict:
    make = lambda: nn.HuberLoss(delta=0.5)  # noqa: E731
    return train(port, 2, make, loader(features(8), 2 * features(9, width=2)), lambda c, out, y: c(out, y))


def huber_sum(port) -> dict:
    """``reduction='sum'``: each rank's sum; DDP averages the ranks' gradients (the global sum over 2)."""
    make = lambda: nn.HuberLoss(reduction="sum", delta=0.5)  # noqa: E731
    return train(port, 2, make, loader(features(8), 2 * features(9, width=2)), lambda c, out, y: c(out, y), lr=0.02)


def poisson_nll(port) -> dict:
    counts = torch.poisson(features(11, width=2).exp(), generator=torch.Generator().manual_seed(12))
    make = lambda: nn.PoissonNLLLoss(log_input=True, full=True)  # noqa: E731
    return train(port, 2, make, loader(features(10), counts), lambda c, out, y: c(out, y), lr=0.05)


def gaussian_nll(port) -> dict:
    """A mean and a variance head (``softplus``), ``GaussianNLLLoss(full=True)``."""
    make = lambda: nn.GaussianNLLLoss(full=True, eps=1e-6)  # noqa: E731

    def loss_of(criterion, out, y):
        mean, var = out[:, :2], F.softplus(out[:, 2:]) + 1e-3
        return criterion(mean, y, var)
    return train(port, 4, make, loader(features(13), features(14, width=2)), loss_of, lr=0.05)


def kldiv_batchmean(port) -> dict:
    """Distillation: ``nn.KLDivLoss(reduction='batchmean')(log_softmax(s / T), softmax(t / T)) * T * T`` plus
    the hard-label cross-entropy; the teacher's logits come with the batch."""
    temperature, alpha = 2.0, 0.7
    make = lambda: nn.KLDivLoss(reduction="batchmean")  # noqa: E731
    teacher = 3 * features(17, width=4)

    def loss_of(criterion, out, t, y):
        soft = criterion(F.log_softmax(out / temperature, dim=1), F.softmax(t / temperature, dim=1))
        return alpha * soft * temperature * temperature + (1 - alpha) * F.cross_entropy(out, y)
    return train(port, 4, make, loader(features(15), teacher, labels(16, 4)), loss_of)


def kldiv_log_target_sum(port) -> dict:
    """``F.kl_div(..., reduction='sum', log_target=True)`` divided by the shard's rows, as printed."""
    teacher = features(19, width=4)

    def loss_of(_, out, t):
        return F.kl_div(F.log_softmax(out, 1), F.log_softmax(t, 1), reduction="sum", log_target=True) / out.shape[0]
    return train(port, 4, lambda: None, loader(features(18), teacher), loss_of)
