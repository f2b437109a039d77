"""Generative-model programs as printed (continued): a VAE drawing its latent with
``torch.distributions.Normal(mu, std).rsample()`` and its loss with ``kl_divergence``; a DDPM training step
(``t = torch.randint(0, T, (b,))``, ``noise = torch.randn_like(x)``) with an EMA copy of the denoiser
(``copy.deepcopy(model)``, ``ema_p.mul_(d).add_(p.detach(), alpha=1 - d)`` after ``optimizer.step()``, in the
step or between steps) and ancestral sampling from the EMA in eval mode under ``torch.no_grad()``.

``case(port) -> dict`` as in ``generative_programs.py``; imports only torch.
"""
from __future__ import annotations

import copy

import torch
from torch import nn, optim
from torch.distributions import Normal, kl_divergence
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, DIM = 8, 4, 16


def _data(seed: int, dim: int = DIM) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(STEPS * GLOBAL_BATCH, dim, generator=g, dtype=F64)
    return DataLoader(TensorDataset(x), batch_size=GLOBAL_BATCH)


class VAE(nn.Module):
    """pytorch/examples' VAE, small, with its latent as a ``Normal`` (as Pyro-style and many tutorials write it)."""

    def __init__(self, latent: int = 2):
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(DIM, 8), nn.Linear(8, latent), nn.Linear(8, latent)
        self.fc3, self.fc4 = nn.Linear(latent, 8), nn.Linear(8, DIM)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, DIM))
        q = Normal(mu, torch.exp(0.5 * logvar))
        z = q.rsample()
        return self.decode(z), q


def vae_normal_rsample(port) -> dict:
    torch.manual_seed(51)
    with port.scope():
        model = VAE().double()
        optimizer = optim.Adam(model.parameters(), lr=1e-2)
    model = port.wrap(model)

    def step(data):
        optimizer.zero_grad()
        recon_batch, q = model(data)
        prior = Normal(torch.zeros_like(q.loc), torch.ones_like(q.scale))
        bce = F.binary_cross_entropy(recon_batch, data.view(-1, DIM), reduction='sum')
        loss = bce + kl_divergence(q, prior).sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_data(52))]
    with torch.no_grad():   # pytorch/examples' sample after each epoch: decode draws from the prior
        sample = port.module(model).decode(torch.randn(4, 2, dtype=F64))
    return {**port.weights(model), "log": log, "sample": sample.reshape(-1).tolist()}


# --- DDPM ----------------------------------------------------------------------------------------------------
T = 10


class Denoiser(nn.Module):
    def __init__(self, dim: int = 4, hidden: int = 16):
        super().__init__()
        self.t_embed = nn.Embedding(T, hidden)
        self.inp, self.mid, self.out = nn.Linear(dim, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, dim)

    def forward(self, x, t):
        h = F.silu(self.inp(x) + self.t_embed(t))
        return self.out(F.silu(self.mid(h)))


betas = torch.linspace(1e-4, 0.2, T, dtype=F64)
alphas = 1 - betas
alphas_cumprod = torch.cumprod(alphas, 0)


@torch.no_grad()
def _ema_update(ema, model, decay=0.9):
    for ema_p, p in zip(ema.parameters(), model.parameters()):
        ema_p.mul_(decay).add_(p.detach(), alpha=1 - decay)


@torch.no_grad()
def _sample(net, n: int = 4, dim: int = 4):
    """DDPM's ancestral sampling (Algorithm 2)."""
    x = torch.randn(n, dim, dtype=F64)
    for i in reversed(range(T)):
        eps = net(x, torch.full((n,), i, dtype=torch.long))
        x = (x - betas[i] / (1 - alphas_cumprod[i]).sqrt() * eps) / alphas[i].sqrt()
        if i > 0:
            x = x + betas[i].sqrt() * torch.randn_like(x)
    return x


def _ddpm(port, ema_where: str, copy_in_scope: bool = True, sample_in_run: bool = False) -> dict:
    torch.manual_seed(53)
    with port.scope():
        model = Denoiser().double()
        if copy_in_scope:
            ema = copy.deepcopy(model)
        optimizer = optim.Adam(model.parameters(), lr=2e-2)
    if not copy_in_scope:
        ema = copy.deepcopy(port.module(model))
    ema.requires_grad_(False)
    ddp_model = port.wrap(model)

    def step(x0):
        b = x0.shape[0]
        t = torch.randint(0, T, (b,), device=x0.device)
        noise = torch.randn_like(x0)
        a = alphas_cumprod[t].view(-1, 1)
        x_t = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(ddp_model(x_t, t), noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if ema_where == "step":
            _ema_update(ema, port.module(ddp_model))
        return loss.detach()

    log = []
    for batch in port.distribute(_data(54, dim=4)):
        log.append(port.mean(port.run(step, args=batch)))
        if ema_where == "between":
            _ema_update(ema, port.module(ddp_model))
    ema.eval()
    if sample_in_run:   # each replica (rank) samples its share, its own draws
        sample = [port.sum(port.run(lambda: _sample(ema).sum())), port.sum(port.run(lambda: _sample(ema).pow(2).sum()))]
    else:
        sample = _sample(ema).reshape(-1).tolist()
    return {**port.weights(model, ema), "log": log, "sample": sample}


def ddpm_ema_in_step(port) -> dict:
    return _ddpm(port, "step")


def ddpm_ema_between(port) -> dict:
    return _ddpm(port, "between")


def ddpm_ema_copied_after_scope(port) -> dict:
    """``ema = copy.deepcopy(model)`` written after the ``with strategy.scope():`` block, updated in the step."""
    return _ddpm(port, "step", copy_in_scope=False)


def ddpm_sample_in_run(port) -> dict:
    return _ddpm(port, "between", sample_in_run=True)


GENERATIVE2 = {f.__name__: f for f in (
    vae_normal_rsample, ddpm_ema_in_step, ddpm_ema_between, ddpm_ema_copied_after_scope, ddpm_sample_in_run)}
