"""Losses across replicas and heads the shard may not reach (see ``loss_programs.py``):

* a multi-task model whose regression labels are missing (``nan``) for some rows: a task's loss is added only
  when the shard has a label (``if mask.any():``), so one replica (rank) skips the head another trains (DDP:
  ``find_unused_parameters=True``), and one global batch has no regression label at all;
* ``nn.AdaptiveLogSoftmaxWithLoss`` as the head (a loss module with parameters, its ``.loss`` a mean);
* supervised contrastive loss against every rank's embeddings and labels (the embeddings gathered with
  ``torch.distributed.nn.functional.all_gather``: gradients flow back to their rank; labels with
  ``dist.all_gather``), the multidev port ``ctx.all_gather(z, axis=0)``;
* the token count gathered as HF Trainer gathers it (``accelerator.gather(num_items).sum()``).

``port.gather_grad(z)`` / ``port.gather(t)`` are the lines the port writes for those gathers.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F

from loss_programs import GLOBAL_BATCH, features, labels, loader
from loss_programs2 import _lm_loop, _token_sum, _tokens


class TaskNet(nn.Module):
    """Two heads and Kendall's ``log_vars`` kept in the model; ``forward`` returns the weighted loss and the
    dict of the tasks' losses (only the tasks with a label in the batch)."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(5, 8), nn.Tanh())
        self.cls, self.reg = nn.Linear(8, 3), nn.Linear(8, 1)
        self.log_vars = nn.Parameter(torch.zeros(2))

    def forward(self, x, y, z):
        h = self.trunk(x)
        loss_dict = {"cls": F.cross_entropy(self.cls(h), y)}
        mask = ~torch.isnan(z)
        if mask.any():
            loss_dict["reg"] = F.mse_loss(self.reg(h[mask]).squeeze(1), z[mask])
        weighted = sum(torch.exp(-self.log_vars[i]) * loss_dict[k] + self.log_vars[i]
                       for i, k in enumerate(("cls", "reg")) if k in loss_dict)
        return weighted, loss_dict


def _missing_reg_labels():
    z = 3 * features(51, rows=4 * GLOBAL_BATCH, width=1).squeeze(1)
    z[1::3] = float("nan")
    z[GLOBAL_BATCH // 2:GLOBAL_BATCH] = float("nan")   # step 1: replica 1's shard has no regression label
    z[2 * GLOBAL_BATCH:3 * GLOBAL_BATCH] = float("nan")   # step 3: the global batch has none
    return loader(features(50, rows=4 * GLOBAL_BATCH), labels(52, 3, rows=4 * GLOBAL_BATCH), z)


def multitask_missing_labels(port) -> dict:
    torch.manual_seed(53)
    with port.scope():
        model = TaskNet().double()
        optimizer = optim.Adam(model.parameters(), lr=0.05)
    model = port.wrap(model, find_unused_parameters=True)

    def step(x, y, z):
        loss, _ = model(x, y, z)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(_missing_reg_labels())]
    return {**port.weights(model), "log": log}


def adaptive_log_softmax(port) -> dict:
    """A trunk and ``AdaptiveLogSoftmaxWithLoss(8, 12, cutoffs=[3, 6])``: ``head(h, y).loss``; a tail cluster's
    weights are used only by a shard with a target in it (DDP: ``find_unused_parameters=True``)."""
    torch.manual_seed(54)
    with port.scope():
        trunk = nn.Sequential(nn.Linear(5, 8), nn.Tanh()).double()
        head = nn.AdaptiveLogSoftmaxWithLoss(8, 12, cutoffs=[3, 6], div_value=2.0).double()
        optimizer = optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.2, momentum=0.9)
    trunk, head = port.wrap(trunk), port.wrap(head, find_unused_parameters=True)   # the clusters in the batch

    def step(x, y):
        optimizer.zero_grad()
        loss = head(trunk(x), y).loss
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(loader(features(55), labels(56, 12)))]
    return {**port.weights(trunk, head), "log": log}


def supcon_loss(z, y, z_all, y_all, offset, temperature=0.5):
    """Khosla et al.'s loss for this shard's anchors against every rank's embeddings (self excluded)."""
    z, z_all = F.normalize(z, dim=1), F.normalize(z_all, dim=1)
    logits = z @ z_all.T / temperature
    self_mask = torch.zeros_like(logits, dtype=torch.bool)
    self_mask[torch.arange(len(z)), offset + torch.arange(len(z))] = True
    logits = logits.masked_fill(self_mask, float("-inf"))
    positives = (y[:, None] == y_all[None, :]) & ~self_mask
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    per_anchor = log_prob.masked_fill(~positives, 0).sum(1) / positives.sum(1).clamp(min=1)
    return -per_anchor.mean()


def supcon_global_negatives(port) -> dict:
    torch.manual_seed(57)
    with port.scope():
        encoder = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 4)).double()
        optimizer = optim.SGD(encoder.parameters(), lr=0.2, momentum=0.9)
    encoder = port.wrap(encoder)

    def step(x, y):
        z = encoder(x)
        z_all, y_all = port.gather_grad(z), port.gather(y)
        loss = supcon_loss(z, y, z_all, y_all, offset=port.rank_in_step() * len(z))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for b in port.distribute(loader(features(58), labels(59, 3)))]
    return {**port.weights(encoder), "log": log}


def tokens_count_gathered(port) -> dict:
    """``num_items_in_batch = gather(num_items).sum()``, the loss times the world size."""
    def make(model, optimizer):
        def step(ids, lab):
            num_items = port.gather((lab != -100).sum().reshape(1)).sum()
            loss = _token_sum(model, ids, lab) / num_items * port.world_size()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.detach()
        return step
    return _lm_loop(port, make, _tokens())
