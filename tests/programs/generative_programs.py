"""Generative-model programs as their public sources print them, ported with two lines (model and optimizer
built in ``strategy.scope()``, the loop body in ``strategy.run`` over ``experimental_distribute_dataset``):

* VQ-VAE with an EMA codebook (rosinality/vq-vae-2-pytorch's ``Quantize``: buffers ``embed``,
  ``cluster_size``, ``embed_avg`` updated in ``forward`` in training mode), with its
  ``dist_fn.all_reduce(embed_onehot_sum)`` / ``all_reduce(embed_sum)`` (its ``distributed`` module: a
  no-op without a process group), without them, and with the port's replica all-reduce in their place;
* Glow's ``ActNorm`` with data-dependent initialisation in ``forward`` on the first batch
  (``if self.initialized.item() == 0: ... self.loc.data.copy_(-mean)``), a small flow trained on ``log_prob``;
* PixelCNN's ``MaskedConv2d`` (``self.weight.data *= self.mask`` before ``super().forward(x)``).

Each is ``case(port) -> dict`` over ``generative_run``'s ports (a DDP rank, or a strategy's port). Float64,
synthetic seeded data, global batch 8. Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS = 8, 4


def _images(seed: int, channels: int = 1, size: int = 4, steps: int = STEPS) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(steps * GLOBAL_BATCH, channels, size, size, generator=g, dtype=F64)
    return DataLoader(TensorDataset(x), batch_size=GLOBAL_BATCH)


# --- rosinality's distributed/distributed.py, as vqvae.py imports it (``from distributed import dist_fn``) ---
def get_world_size():
    if not dist.is_available():
        return 1
    if not dist.is_initialized():
        return 1
    return dist.get_world_size()


def all_reduce(tensor, op=dist.ReduceOp.SUM):
    world_size = get_world_size()
    if world_size == 1:
        return tensor
    dist.all_reduce(tensor, op=op)
    return tensor


class Quantize(nn.Module):
    """rosinality's EMA codebook; ``reduce`` stands for the module's ``dist_fn.all_reduce`` (or nothing)."""

    def __init__(self, dim, n_embed, decay=0.99, eps=1e-5, reduce=all_reduce):
        super().__init__()
        self.dim, self.n_embed, self.decay, self.eps, self.reduce = dim, n_embed, decay, eps, reduce
        embed = torch.randn(dim, n_embed)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(n_embed))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, input):
        flatten = input.reshape(-1, self.dim)
        dist = (flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed
                + self.embed.pow(2).sum(0, keepdim=True))
        _, embed_ind = (-dist).max(1)
        embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
        embed_ind = embed_ind.view(*input.shape[:-1])
        quantize = self.embed_code(embed_ind)

        if self.training:
            embed_onehot_sum = embed_onehot.sum(0)
            embed_sum = flatten.transpose(0, 1) @ embed_onehot
            if self.reduce is not None:
                self.reduce(embed_onehot_sum)
                self.reduce(embed_sum)
            self.cluster_size.data.mul_(self.decay).add_(embed_onehot_sum, alpha=1 - self.decay)
            self.embed_avg.data.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
            n = self.cluster_size.sum()
            cluster_size = (self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n
            embed_normalized = self.embed_avg / cluster_size.unsqueeze(0)
            self.embed.data.copy_(embed_normalized)

        diff = (quantize.detach() - input).pow(2).mean()
        quantize = input + (quantize - input).detach()
        return quantize, diff, embed_ind

    def embed_code(self, embed_id):
        return F.embedding(embed_id, self.embed.transpose(0, 1))


class NoGradQuantize(Quantize):
    """The same EMA written the other common way: ``with torch.no_grad():`` and in-place ops on the buffers."""

    def forward(self, input):
        flatten = input.reshape(-1, self.dim)
        dist = (flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed
                + self.embed.pow(2).sum(0, keepdim=True))
        embed_ind = (-dist).max(1)[1]
        quantize = self.embed_code(embed_ind.view(*input.shape[:-1]))
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
                counts, sums = onehot.sum(0), flatten.transpose(0, 1) @ onehot
                if self.reduce is not None:
                    self.reduce(counts)
                    self.reduce(sums)
                self.cluster_size.mul_(self.decay).add_(counts, alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_(sums, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n
                self.embed.copy_(self.embed_avg / size.unsqueeze(0))
        diff = (quantize.detach() - input).pow(2).mean()
        return input + (quantize - input).detach(), diff, embed_ind


class VQVAE(nn.Module):
    """Encoder, quantiser on channels-last codes, decoder (rosinality's permutes), 1x4x4 images."""

    def __init__(self, quantize):
        super().__init__()
        self.enc = nn.Conv2d(1, 3, 2, stride=2)
        self.quantize = quantize
        self.dec = nn.ConvTranspose2d(3, 1, 2, stride=2)

    def forward(self, input):
        z = self.enc(input).permute(0, 2, 3, 1)
        quant, diff, _ = self.quantize(z)
        return self.dec(quant.permute(0, 3, 1, 2)), diff


def _vqvae(port, reduce, quantize=Quantize) -> dict:
    """rosinality's train_vqvae.py loop: ``recon_loss + latent_loss_weight * latent_loss``, Adam."""
    torch.manual_seed(41)
    with port.scope():
        model = VQVAE(quantize(3, 5, decay=0.8, reduce=reduce)).double()
        optimizer = optim.Adam(model.parameters(), lr=0.05)
    model = port.wrap(model)
    criterion, latent_loss_weight = nn.MSELoss(), 0.25

    def step(img):
        model.zero_grad()
        out, latent_loss = model(img)
        recon_loss = criterion(out, img)
        loss = recon_loss + latent_loss_weight * latent_loss.mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_images(42))]
    return {**port.weights(model), **port.buffers(model), "log": log}


def vqvae_ema_dist_fn(port) -> dict:
    """As printed: ``dist_fn.all_reduce`` (under DDP a sum over the ranks; without a process group nothing)."""
    return _vqvae(port, all_reduce)


def vqvae_ema_dist_all_reduce(port) -> dict:
    """``dist.all_reduce(embed_sum)`` called directly (no helper): inside a replica torch.distributed is refused."""
    return _vqvae(port, dist.all_reduce)


def vqvae_ema_no_reduce(port) -> dict:
    """The EMA from each replica's (rank's) own batch: DDP broadcasts rank 0's buffers at each forward."""
    return _vqvae(port, None)


def vqvae_ema_ported(port) -> dict:
    """The port's line: the statistics summed over the replicas (``port.all_reduce_``: DDP ``dist.all_reduce``)."""
    return _vqvae(port, port.all_reduce_)


def vqvae_ema_rank0_ported(port) -> dict:
    """DDP without the all-reduce keeps rank 0's buffers (broadcast at each forward); the port takes replica 0's
    statistics (``port.rank0_``: ``all_gather(t[None], axis=0)[0]``; DDP: nothing, its broadcast does it)."""
    return _vqvae(port, port.rank0_)


def vqvae_ema_no_grad_ported(port) -> dict:
    return _vqvae(port, port.all_reduce_, NoGradQuantize)


# --- Glow's ActNorm with data-dependent initialisation, a small flow trained on log_prob ---------------------
logabs = lambda x: torch.log(torch.abs(x))  # noqa: E731


class ActNorm(nn.Module):
    def __init__(self, in_channel, logdet=True):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, in_channel, 1, 1))
        self.scale = nn.Parameter(torch.ones(1, in_channel, 1, 1))
        self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))
        self.logdet = logdet

    def initialize(self, input):
        with torch.no_grad():
            flatten = input.permute(1, 0, 2, 3).contiguous().view(input.shape[1], -1)
            mean = flatten.mean(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
            std = flatten.std(1).unsqueeze(1).unsqueeze(2).unsqueeze(3).permute(1, 0, 2, 3)
            self.loc.data.copy_(-mean)
            self.scale.data.copy_(1 / (std + 1e-6))

    def forward(self, input):
        _, _, height, width = input.shape
        if self.initialized.item() == 0:
            self.initialize(input)
            self.initialized.fill_(1)
        log_abs = logabs(self.scale)
        logdet = height * width * torch.sum(log_abs)
        return self.scale * (input + self.loc), logdet


class AffineCoupling(nn.Module):
    """RealNVP's affine coupling on channel halves (Glow's ``AffineCoupling``, a 1x1-conv net)."""

    def __init__(self, channels, hidden=6):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(channels // 2, hidden, 1), nn.ReLU(), nn.Conv2d(hidden, channels, 1))

    def forward(self, input):
        in_a, in_b = input.chunk(2, 1)
        log_s, t = self.net(in_a).chunk(2, 1)
        s = torch.sigmoid(log_s + 2)
        out_b = (in_b + t) * s
        return torch.cat([in_a, out_b], 1), torch.sum(torch.log(s).view(input.shape[0], -1), 1)


class Flow(nn.Module):
    def __init__(self, channels=2, blocks=2):
        super().__init__()
        self.layers = nn.ModuleList(m for _ in range(blocks) for m in (ActNorm(channels), AffineCoupling(channels)))

    def forward(self, x):
        """Glow's ``forward``: the log-likelihood of each example (``log_p + logdet``)."""
        logdet = 0
        for layer in self.layers:
            x, det = layer(x)
            logdet = logdet + det
            x = x.flip(1)
        log_p = (-0.5 * (x ** 2 + math.log(2 * math.pi))).view(x.shape[0], -1).sum(1)
        return log_p + logdet


def _flow(port, init_outside: bool) -> dict:
    torch.manual_seed(43)
    with port.scope():
        model = Flow().double()
        optimizer = optim.Adam(model.parameters(), lr=0.02)
    model = port.wrap(model)
    loader = _images(44, channels=2)
    if init_outside:   # the data-dependent init on the first global batch, on one device, before training
        with torch.no_grad():
            port.module(model)(next(iter(loader))[0])

    def step(x):
        loss = -model(x).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    return {**port.weights(model), **port.buffers(model), "log": log}


def actnorm_init_in_step(port) -> dict:
    """As printed: the first ``forward`` (in the step) initialises from the batch it sees: each rank's half."""
    return _flow(port, init_outside=False)


def actnorm_init_global_batch(port) -> dict:
    """The init forward run on the first global batch before training (every rank the same batch)."""
    return _flow(port, init_outside=True)


# --- PixelCNN's masked convolution ----------------------------------------------------------------------------
class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


def pixelcnn_masked_conv(port) -> dict:
    """jzbontar/pixelcnn-pytorch's net, 4 feature maps, 4 intensity levels; cross-entropy on the levels, Adam."""
    fm, levels = 4, 4
    torch.manual_seed(45)
    with port.scope():
        net = nn.Sequential(
            MaskedConv2d('A', 1, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
            MaskedConv2d('B', fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
            nn.Conv2d(fm, levels, 1)).double()
        optimizer = optim.Adam(net.parameters(), lr=0.05)
    net = port.wrap(net)

    def step(input):
        target = (input[:, 0] * (levels - 1)).round().long()
        loss = F.cross_entropy(net(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_images(46))]
    return {**port.weights(net), "log": log}


GENERATIVE = {f.__name__: f for f in (
    vqvae_ema_dist_fn, vqvae_ema_dist_all_reduce, vqvae_ema_no_reduce, vqvae_ema_ported, vqvae_ema_rank0_ported,
    vqvae_ema_no_grad_ported,
    actnorm_init_in_step, actnorm_init_global_batch, pixelcnn_masked_conv)}
