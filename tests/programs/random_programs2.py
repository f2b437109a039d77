"""Python's, numpy's and a program's own randomness in the step, as public programs print them:

* MixUp (facebookresearch/mixup-cifar10's ``mixup_data``: ``lam = np.random.beta(alpha, alpha)``,
  ``index = torch.randperm(batch_size)``) and CutMix (clovaai/CutMix-PyTorch: ``np.random.rand(1)``,
  ``np.random.beta``, ``rand_bbox``'s ``np.random.randint``, ``torch.randperm``);
* seq2seq teacher forcing ``random.random() < teacher_forcing_ratio`` per batch, ``random.choice`` of an
  augmentation;
* a program's ``torch.Generator`` passed as ``generator=``; ``torch.manual_seed`` / ``random.seed`` /
  ``np.random.seed`` with ``seed + rank`` (the port's rank: the replica context's
  ``replica_id_in_sync_group``); ``torch.random.fork_rng`` around a fixed-seed probe; gradient noise added
  by hooks in backward.

Each is ``case(port) -> dict`` over ``random_run``'s ports. Float64, synthetic seeded data, global batch 8,
every process seeded alike. Imports only torch and numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from random_programs import F64, GLOBAL_BATCH, STEPS, WIDTH, _data, _train


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _classifier(dropout: float = 0.0) -> nn.Module:
    return nn.Sequential(nn.Linear(WIDTH, 8), nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 3)).double()


# --- mixup-cifar10's train.py ---------------------------------------------------------------------------
def mixup_data(x, y, alpha=1.0, use_cuda=False):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1
    batch_size = x.size()[0]
    index = torch.randperm(batch_size)
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def mixup_numpy_beta(port) -> dict:
    _seed_all(21)
    with port.scope():
        model = _classifier()

    def loss(m, x, y):
        inputs, targets_a, targets_b, lam = mixup_data(x, y, 0.4)
        return mixup_criterion(nn.CrossEntropyLoss(), m(inputs), targets_a, targets_b, lam)

    return {**_train(port, model, loss), "after": [random.random(), float(np.random.rand()), float(torch.rand(()))]}


# --- CutMix-PyTorch's train.py, on 1x4x4 images -----------------------------------------------------------
def rand_bbox(size, lam):
    W = size[2]
    H = size[3]
    cut_rat = np.sqrt(1. - lam)
    cut_w = int(W * cut_rat)   # (np.int as printed; removed from numpy)
    cut_h = int(H * cut_rat)
    cx = np.random.randint(W)
    cy = np.random.randint(H)
    bbx1 = np.clip(cx - cut_w // 2, 0, W)
    bby1 = np.clip(cy - cut_h // 2, 0, H)
    bbx2 = np.clip(cx + cut_w // 2, 0, W)
    bby2 = np.clip(cy + cut_h // 2, 0, H)
    return bbx1, bby1, bbx2, bby2


def cutmix(port) -> dict:
    _seed_all(22)
    beta, cutmix_prob = 1.0, 0.7
    with port.scope():
        model = nn.Sequential(nn.Conv2d(1, 2, 2), nn.Tanh(), nn.Flatten(), nn.Linear(18, 3)).double()
    criterion = nn.CrossEntropyLoss()

    def loss(m, x, target):
        input = x.reshape(-1, 1, 4, 4)[:, :, :, :].clone()
        r = np.random.rand(1)
        if beta > 0 and r < cutmix_prob:
            lam = np.random.beta(beta, beta)
            rand_index = torch.randperm(input.size()[0])
            target_a = target
            target_b = target[rand_index]
            bbx1, bby1, bbx2, bby2 = rand_bbox(input.size(), lam)
            input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2, bby1:bby2]
            lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (input.size()[-1] * input.size()[-2]))
            output = m(input)
            return criterion(output, target_a) * lam + criterion(output, target_b) * (1. - lam)
        return criterion(m(input), target)

    images = torch.randn(STEPS * GLOBAL_BATCH, 16, generator=torch.Generator().manual_seed(3), dtype=F64)
    labels = torch.randint(0, 3, (STEPS * GLOBAL_BATCH,), generator=torch.Generator().manual_seed(4))
    data = DataLoader(TensorDataset(images, labels), batch_size=GLOBAL_BATCH)
    return _train(port, model, loss, data=data)


# --- teacher forcing per batch, random.choice of an augmentation ------------------------------------------
class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec, self.out = nn.GRUCell(1, 5), nn.GRUCell(1, 5), nn.Linear(5, 1)

    def forward(self, src, trg, teacher_forcing_ratio=0.5):
        hidden = torch.zeros(src.shape[0], 5, dtype=src.dtype)
        for t in range(src.shape[1]):
            hidden = self.enc(src[:, t:t + 1], hidden)
        input, outputs = trg[:, :1], []
        for t in range(1, trg.shape[1]):
            hidden = self.dec(input, hidden)
            output = self.out(hidden)
            outputs.append(output)
            teacher_force = random.random() < teacher_forcing_ratio
            input = trg[:, t:t + 1] if teacher_force else output
        return torch.cat(outputs, dim=1)


def teacher_forcing(port) -> dict:
    _seed_all(23)
    with port.scope():
        model = Seq2Seq().double()

    def loss(m, x, y):
        return F.mse_loss(m(x[:, :3], x[:, 3:]), x[:, 4:])

    return {**_train(port, model, loss), "after": random.random()}


def flip(x):
    return x.flip(-1)


def jitter(x):
    return x + 0.2 * torch.randn_like(x)


def random_choice_augmentation(port) -> dict:
    _seed_all(24)
    augmentations = [flip, jitter, lambda x: x]
    with port.scope():
        model = _classifier(0.3)

    def loss(m, x, y):
        aug = random.choice(augmentations)
        if random.random() < 0.5:
            x = x * random.uniform(0.8, 1.2)
        return F.cross_entropy(m(aug(x)), y)

    return _train(port, model, loss)


# --- a program's own generator, seed + rank, fork_rng -------------------------------------------------------
def explicit_generator(port) -> dict:
    """``g = torch.Generator().manual_seed(7)`` made once; the step's masks ``torch.rand(..., generator=g)``."""
    _seed_all(25)
    g = torch.Generator().manual_seed(7)
    with port.scope():
        model = _classifier()

    def loss(m, x, y):
        keep = (torch.rand(x.shape, generator=g, dtype=F64) < 0.8).double()
        perm = torch.randperm(x.shape[0], generator=g)
        return F.cross_entropy(m(x * keep / 0.8), y) + 0.1 * F.cross_entropy(m(x[perm]), y[perm])

    return {**_train(port, model, loss), "after": torch.rand(2, generator=g).tolist()}


def generator_reseeded_in_step(port) -> dict:
    """A fixed perturbation per step from one generator made before training and re-seeded in the step
    (``g.manual_seed(1234)``): each DDP rank re-seeds its own; replica threads would share one object."""
    _seed_all(29)
    g = torch.Generator().manual_seed(0)
    with port.scope():
        model = _classifier()

    def loss(m, x, y):
        g.manual_seed(1234)
        shift = torch.randn(WIDTH, generator=g, dtype=F64) * 0.1
        scale = 1 + 0.1 * torch.rand(WIDTH, generator=g, dtype=F64)
        return F.cross_entropy(m(x * scale + shift), y)

    return _train(port, model, loss)


def seed_plus_rank(port) -> dict:
    """Each rank seeded ``seed + rank`` once, before training (the port runs the seeding in each replica)."""
    _seed_all(26)
    with port.scope():
        model = _classifier(0.4)

    def seed_worker():
        rank = port.replica_id()
        torch.manual_seed(100 + rank)
        np.random.seed(100 + rank)
        random.seed(100 + rank)

    port.run(seed_worker)

    def loss(m, x, y):
        lam = float(np.random.beta(0.5, 0.5)) if random.random() < 0.7 else 1.0
        return lam * F.cross_entropy(m(x + 0.1 * torch.randn_like(x)), y)

    return _train(port, model, loss)


def fork_rng_probe(port) -> dict:
    """A fixed-noise probe under ``torch.random.fork_rng`` in the step: dropout after it continues as before."""
    _seed_all(27)
    probe_input = torch.randn(2, WIDTH, dtype=F64)
    with port.scope():
        model = _classifier(0.5)

    def loss(m, x, y):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1234)
            probe = m(probe_input + torch.randn_like(probe_input))
        return F.cross_entropy(m(x), y) + 0.01 * probe.pow(2).mean()

    return {**_train(port, model, loss), "after": torch.rand(2).tolist()}


def gradient_noise_hooks(port) -> dict:
    """Gradient noise (Neelakantan et al.) added by hooks registered once: ``g + sigma * torch.randn_like(g)``."""
    _seed_all(28)
    with port.scope():
        model = _classifier(0.2)
    for p in model.parameters():
        p.register_hook(lambda grad: grad + 0.05 * torch.randn_like(grad))
    return {**_train(port, model, lambda m, x, y: F.cross_entropy(m(x), y)), "after": torch.rand(2).tolist()}


RANDOM2 = {f.__name__: f for f in (mixup_numpy_beta, cutmix, teacher_forcing, random_choice_augmentation,
                                    explicit_generator, generator_reseeded_in_step, seed_plus_rank, fork_rng_probe,
                                    gradient_noise_hooks)}
