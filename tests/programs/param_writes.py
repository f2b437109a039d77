"""Programs that change parameters, or what is trained, outside ``optimizer.step()``, as their authors
print them, inside the step (``strategy.run``; each DDP rank's loop body) and between steps (outside it):

* WGAN's weight clipping ``p.data.clamp_(-c, c)`` after ``optD.step()``; max-norm constraints
  (``w.copy_(torch.renorm(w, 2, 0, maxnorm))`` under ``no_grad``); CLIP's ``logit_scale.clamp_(0,
  math.log(100))``; SwAV's prototype normalisation (``weight.data.clone()``, ``F.normalize``, ``copy_``);
* lottery-ticket magnitude pruning (``p.data.mul_(mask)`` after each step, masks as buffers or a dict);
  re-initialising a dead unit (``nn.init.kaiming_uniform_(layer.weight[idx:idx + 1])``, a slice);
* ULMFiT's gradual unfreezing with discriminative learning rates: ``requires_grad_(True)`` on one more
  layer group each epoch (the optimizer holding every group from the start), or the group added with
  ``optimizer.add_param_group`` when it is unfrozen;
* Lookahead by hand (slow weights in a dict, ``fast.data.copy_(slow)`` every k steps) and Polyak
  averaging by hand (``avg.mul_(0.99).add_(p.detach(), alpha=0.01)``) into plain tensors or into a
  second module built in the scope.

Each is ``case(port) -> dict`` over ``pytutorials_run``'s ports (DDP rank, or a strategy's port); the
runner is ``param_writes_run.py``. Float64, synthetic seeded data, global batch 8. This module imports
only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, WIDTH, CLASSES = 8, 4, 6, 3


def _loader(seed: int, steps: int = STEPS) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * GLOBAL_BATCH, WIDTH, generator=g, dtype=F64)
    y = torch.randint(0, CLASSES, (steps * GLOBAL_BATCH,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


class Net(nn.Module):
    """Three layer groups (ULMFiT's), the layers pruning and re-initialisation act on."""

    def __init__(self, hidden: int = 8):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(WIDTH, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, CLASSES)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


def _train(port, model, opt, loader, in_step=None, between=None) -> list:
    """The classifier loop: ``in_step(i)`` after ``opt.step()`` in the step, ``between(i)`` after the run."""
    def step(x, y, i):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if in_step is not None:
            in_step(i)
        return loss.detach()

    log = []
    for i, (x, y) in enumerate(port.distribute(loader)):
        log.append(port.mean(port.run(step, args=(x, y, i))))
        if between is not None:
            between(i)
    return log


def _built(port, seed: int, make=Net, opt=lambda m: optim.SGD(m.parameters(), lr=0.5, momentum=0.9)):
    torch.manual_seed(seed)
    with port.scope():
        model = make().double()
        optimizer = opt(model)
    return model, optimizer


def _result(port, log, *models, **extra) -> dict:
    return {**port.weights(*models), "log": log, **extra}


# --- constraints: WGAN clipping, max-norm, CLIP's logit scale, SwAV's prototypes ----------------------------
def wgan_clip_in_step(port) -> dict:
    """WGAN: RMSprop critic clipped to [-c, c] through ``.data`` after each critic step, then the generator."""
    torch.manual_seed(31)
    clamp = 0.05
    with port.scope():
        netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, WIDTH)).double()
        netD = nn.Sequential(nn.Linear(WIDTH, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)).double()
        optD, optG = optim.RMSprop(netD.parameters(), lr=5e-2), optim.RMSprop(netG.parameters(), lr=5e-2)
    netG, netD = port.wrap(netG), port.wrap(netD)
    noise = torch.randn(STEPS * GLOBAL_BATCH, 4, generator=torch.Generator().manual_seed(32), dtype=F64)

    def step(real, z):
        netD.zero_grad()
        fake = netG(z)
        errD = -netD(real).mean() + netD(fake.detach()).mean()
        errD.backward()
        optD.step()
        for p in netD.parameters():
            p.data.clamp_(-clamp, clamp)
        netG.zero_grad()
        errG = -netD(fake).mean()
        errG.backward()
        optG.step()
        return errD.detach()

    real = _loader(33).dataset.tensors[0]
    loader = DataLoader(TensorDataset(real, noise), batch_size=GLOBAL_BATCH)
    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    clipped = sum(int((p.detach().abs() == clamp).sum()) for p in port.module(netD).parameters())
    return _result(port, log, netG, netD, clipped=clipped)


def _max_norm(model, maxnorm=0.5):
    with torch.no_grad():
        for w in (model.fc1.weight, model.fc2.weight):
            w.copy_(torch.renorm(w, 2, 0, maxnorm))


def maxnorm_in_step(port) -> dict:
    model, opt = _built(port, 34)
    model = port.wrap(model)
    log = _train(port, model, opt, _loader(35), in_step=lambda i: _max_norm(port.module(model)))
    return _result(port, log, model)


def maxnorm_between(port) -> dict:
    model, opt = _built(port, 34)
    model = port.wrap(model)
    log = _train(port, model, opt, _loader(35), between=lambda i: _max_norm(port.module(model)))
    return _result(port, log, model)


class Clip(nn.Module):
    """CLIP's two towers and learned temperature. The towers start equal and each "caption" is its image,
    so the pairs match and the temperature rises from near its bound: the clamp bites."""

    def __init__(self):
        super().__init__()
        self.visual, self.text = nn.Linear(WIDTH, 5), nn.Linear(WIDTH, 5)
        self.text.load_state_dict(self.visual.state_dict())
        self.logit_scale = nn.Parameter(torch.ones([]) * 4.6)

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.text(text), dim=-1)
        return self.logit_scale.exp() * image_features @ text_features.t()


def clip_logit_scale_in_step(port) -> dict:
    model, opt = _built(port, 36, Clip, lambda m: optim.AdamW(m.parameters(), lr=0.05))
    model = port.wrap(model)
    scales = []

    def step(image, label):
        logits_per_image = model(image, image + 0.1 * label[:, None])
        target = torch.arange(len(image))
        loss = (F.cross_entropy(logits_per_image, target) + F.cross_entropy(logits_per_image.t(), target)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            port.module(model).logit_scale.clamp_(0, math.log(100))
        return loss.detach()

    log = []
    for batch in port.distribute(_loader(37)):
        log.append(port.mean(port.run(step, args=batch)))
        scales.append(float(port.module(model).logit_scale.detach()))
    return _result(port, log, model, scales=scales)


class SwAV(nn.Module):
    def __init__(self, prototypes: int = 5):
        super().__init__()
        self.projection_head = nn.Linear(WIDTH, 8)
        self.prototypes = nn.Linear(8, prototypes, bias=False)

    def forward(self, x):
        return self.prototypes(F.normalize(self.projection_head(x), dim=1, p=2))


def swav_prototypes_in_step(port) -> dict:
    """SwAV's loop normalises the prototypes at the start of each iteration, then trains them."""
    model, opt = _built(port, 38, SwAV, lambda m: optim.SGD(m.parameters(), lr=0.8))
    model = port.wrap(model)

    def step(x, y):
        with torch.no_grad():
            w = port.module(model).prototypes.weight.data.clone()
            w = F.normalize(w, dim=1, p=2)
            port.module(model).prototypes.weight.copy_(w)
        loss = F.cross_entropy(model(x) / 0.1, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_loader(39))]
    return _result(port, log, model)


# --- pruning and re-initialisation ----------------------------------------------------------------------
class PrunedNet(Net):
    """Lottery ticket: a magnitude mask per weight, kept as buffers."""

    def __init__(self):
        super().__init__()
        for name in ("fc1", "fc2"):
            w = getattr(self, name).weight.detach()
            self.register_buffer(f"mask_{name}", (w.abs() > w.abs().median()).to(w.dtype))


def lottery_buffers_in_step(port) -> dict:
    model, opt = _built(port, 40, PrunedNet)
    model = port.wrap(model)

    def prune(i):
        m = port.module(model)
        for name in ("fc1", "fc2"):
            getattr(m, name).weight.data.mul_(getattr(m, f"mask_{name}"))

    log = _train(port, model, opt, _loader(41), in_step=prune)
    return _result(port, log, model)


def _masks(model) -> dict:
    return {n: (p.detach().abs() > p.detach().abs().median()).to(p.dtype)
            for n, p in model.named_parameters() if n.endswith("weight")}


def _lottery_dict(port, in_step: bool) -> dict:
    model, opt = _built(port, 42)
    masks = _masks(model)
    model = port.wrap(model)

    def prune(i):
        for name, p in port.module(model).named_parameters():
            if name in masks:
                p.data.mul_(masks[name])

    log = _train(port, model, opt, _loader(43), **({"in_step": prune} if in_step else {"between": prune}))
    return _result(port, log, model)


def lottery_dict_in_step(port) -> dict:
    return _lottery_dict(port, in_step=True)


def lottery_dict_between(port) -> dict:
    return _lottery_dict(port, in_step=False)


def _reinit_dead(model, i):
    """Every 2nd step the unit of fc1 with the smallest weight norm is drawn again (kaiming, as built)."""
    if i % 2 == 1:
        with torch.no_grad():
            idx = int(model.fc1.weight.norm(dim=1).argmin())
            nn.init.kaiming_uniform_(model.fc1.weight[idx:idx + 1], a=math.sqrt(5))
            model.fc1.bias[idx:idx + 1].zero_()


def reinit_dead_in_step(port) -> dict:
    model, opt = _built(port, 44, opt=lambda m: optim.Adam(m.parameters(), lr=0.05))
    model = port.wrap(model)
    log = _train(port, model, opt, _loader(45), in_step=lambda i: _reinit_dead(port.module(model), i))
    return _result(port, log, model)


def reinit_dead_between(port) -> dict:
    model, opt = _built(port, 44, opt=lambda m: optim.Adam(m.parameters(), lr=0.05))
    model = port.wrap(model)
    log = _train(port, model, opt, _loader(45), between=lambda i: _reinit_dead(port.module(model), i))
    return _result(port, log, model)


PARAM_WRITES = {f.__name__: f for f in (
    wgan_clip_in_step, maxnorm_in_step, maxnorm_between, clip_logit_scale_in_step, swav_prototypes_in_step,
    lottery_buffers_in_step, lottery_dict_in_step, lottery_dict_between, reinit_dead_in_step, reinit_dead_between)}
