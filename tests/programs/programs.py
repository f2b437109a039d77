"""Small ports of public PyTorch training programs, written as their authors write them (plain torch).

Each program's ``step`` is the program's own training step, unchanged between the three runners:
one device (the whole global batch), multidev (``strategy.scope()`` around ``build``,
``strategy.run(step, ...)`` on each half) and torch DDP (2 Gloo processes, each on its half, models
wrapped in ``DistributedDataParallel``). Data are synthetic and seeded; every global batch splits
along dimension 0 (batch-first, as multidev splits it).

Where a program draws random numbers inside its step (the VAE's reparameterisation, the GAN's
noise), the draw comes with the batch instead: per-replica random streams are another issue's
(and DDP's ranks draw differently from one device anyway). Dropout is p=0 for the same reason.
Float64 everywhere except ``hf_bf16``, whose bf16 autocast rounds differently when the batch is
cut in two (compared with a tolerance).

This module imports only torch: the DDP runner must not import multidev.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

F64 = torch.float64
GLOBAL_BATCH = 8


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@dataclass
class Program:
    """A training program: ``build() -> state`` (models, optimizers, schedulers), the global
    batches, ``step(state, batch, carry) -> (loss, carry)`` and the names of its models;
    ``after_step(state, i)`` after step ``i`` (multidev: in the strategy's scope)."""

    name: str
    build: Callable[[], dict]
    batches: Callable[[], list]
    step: Callable[[dict, tuple, Any], tuple]
    models: tuple = ("model",)
    initial_carry: Callable[[int], Any] = lambda batch: None   # per batch size (a replica's half or all)
    dtype: torch.dtype = F64
    tolerance: float = 1e-12
    compare_one_device: bool = True    # False: BatchNorm's batch statistics differ from one device (DDP only)
    extra: dict = field(default_factory=dict)
    after_step: Callable[[dict, int], None] | None = None   # between steps, cross-replica (an epoch's end)
    ddp_differs: str = ""      # why DDP gives no reference (then multidev is compared with one device only)
    refused: str = ""          # multidev refuses the program: a regular expression its error message matches
    averaged: tuple = ()       # state entries compared as models are, but never wrapped in DDP (AveragedModel)
    workers_refused: str = ""  # MultiWorkerMirroredStrategy refuses it where MirroredStrategy trains (a regex)
    ddp_refused: str = ""      # DDP refuses it (a regular expression its error matches)
    observe: Callable[[dict], list] | None = None   # numbers recorded after each step (cross-replica), compared exactly
    ddp_kwargs: dict = field(default_factory=dict)   # DistributedDataParallel's options (broadcast_buffers=False)


# --- pytorch/examples mnist: CNN, Adadelta, nll_loss ------------------------------------------------------
class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def _mnist_build():
    torch.manual_seed(1)
    model = MnistNet().double()
    return {"model": model, "opt": torch.optim.Adadelta(model.parameters(), lr=1.0)}


def _mnist_batches():
    g = _gen(10)
    return [(torch.randn(GLOBAL_BATCH, 1, 12, 12, generator=g, dtype=F64), torch.randint(0, 10, (GLOBAL_BATCH,), generator=g))
            for _ in range(3)]


def _mnist_step(state, batch, carry):
    data, target = batch
    state["opt"].zero_grad()
    loss = F.nll_loss(state["model"](data), target)
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


# --- pytorch/examples word_language_model: LSTM / Transformer, clip, manual SGD, carried hidden ---------
class RNNModel(nn.Module):
    def __init__(self, ntoken=20, ninp=12, nhid=12, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.0, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight   # tied weights, as --tied
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return F.log_softmax(self.decoder(output), dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


class TransformerModel(nn.Module):
    def __init__(self, ntoken=20, ninp=16, nhead=2, nhid=24, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.0, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp

    def forward(self, src):
        mask = nn.Transformer.generate_square_subsequent_mask(src.shape[1], dtype=self.decoder.weight.dtype)
        x = self.encoder(src) * math.sqrt(self.ninp)
        return F.log_softmax(self.decoder(self.transformer_encoder(x, mask, is_causal=True)), dim=-1)


def _lm_batches(bptt=5, steps=3):
    g = _gen(20)
    stream = torch.randint(0, 20, (GLOBAL_BATCH, bptt * steps + 1), generator=g)   # batchify: one row per stream
    return [(stream[:, i:i + bptt], stream[:, i + 1:i + 1 + bptt]) for i in range(0, bptt * steps, bptt)]


def _repackage_hidden(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(_repackage_hidden(v) for v in h)


def _lstm_build():
    torch.manual_seed(2)
    return {"model": RNNModel().double(), "lr": 2.0, "clip": 0.25}


def _lm_train_step(state, batch, hidden):
    """word_language_model's train(): one function for both models (hidden state for the LSTM)."""
    data, targets = batch
    model = state["model"]
    model.zero_grad()
    if hidden is not None:
        hidden = _repackage_hidden(hidden)
        output, hidden = model(data, hidden)
    else:
        output = model(data)
    loss = F.nll_loss(output.reshape(-1, output.shape[-1]), targets.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), state["clip"])
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-state["lr"])
    return loss.detach(), hidden


def _transformer_build():
    torch.manual_seed(3)
    return {"model": TransformerModel().double(), "lr": 0.5, "clip": 0.25}


# --- pytorch/examples vae ---------------------------------------------------------------------------------
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(36, 16), nn.Linear(16, 4), nn.Linear(16, 4)
        self.fc3, self.fc4 = nn.Linear(4, 16), nn.Linear(16, 36)

    def forward(self, x, eps):
        h1 = F.relu(self.fc1(x.view(-1, 36)))
        mu, logvar = self.fc21(h1), self.fc22(h1)
        z = mu + eps * torch.exp(0.5 * logvar)    # reparameterize, with the batch's noise
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def _vae_build():
    torch.manual_seed(4)
    model = VAE().double()
    return {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=1e-2)}


def _pairs(seed: int, first: Callable, width: int, noise: int, steps: int = 3) -> Callable[[], list]:
    """Global batches of (data from ``first(shape)``, noise): the data and the step's random draws."""
    def batches():
        g = _gen(seed)
        return [(first((GLOBAL_BATCH, width), generator=g, dtype=F64), torch.randn(GLOBAL_BATCH, noise, generator=g, dtype=F64))
                for _ in range(steps)]
    return batches


def _vae_step(state, batch, carry):
    data, eps = batch
    state["opt"].zero_grad()
    recon, mu, logvar = state["model"](data, eps)
    bce = F.binary_cross_entropy(recon, data.view(-1, 36), reduction="mean")
    kld = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    loss = bce + kld
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


# --- pytorch/examples dcgan: two networks, two optimizers -------------------------------------------------
def _gan_nets(batch_norm: bool):
    norm = (lambda n: nn.BatchNorm1d(n)) if batch_norm else (lambda n: nn.Identity())
    generator = nn.Sequential(nn.Linear(4, 16), norm(16), nn.ReLU(True), nn.Linear(16, 12), nn.Tanh())
    discriminator = nn.Sequential(nn.Linear(12, 16), norm(16), nn.LeakyReLU(0.2, True), nn.Linear(16, 1), nn.Sigmoid())
    return generator, discriminator


def _gan_build(batch_norm: bool):
    def build():
        torch.manual_seed(5)
        netG, netD = (m.double() for m in _gan_nets(batch_norm))
        return {"netG": netG, "netD": netD,
                "optG": torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999)),
                "optD": torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))}
    return build


def _gan_step(state, batch, carry):
    real, noise = batch
    netG, netD, optG, optD = state["netG"], state["netD"], state["optG"], state["optD"]
    criterion = nn.BCELoss()
    netD.zero_grad()
    label = torch.full((real.shape[0], 1), 1.0, dtype=real.dtype)
    errD_real = criterion(netD(real), label)
    errD_real.backward()
    fake = netG(noise)
    label = label.fill_(0.0)
    errD_fake = criterion(netD(fake.detach()), label)
    errD_fake.backward()
    optD.step()
    netG.zero_grad()
    label = label.fill_(1.0)
    errG = criterion(netD(fake), label)
    errG.backward()
    optG.step()
    return (errD_real + errD_fake + errG).detach(), carry


# --- a tiny Hugging Face style causal LM: AdamW, linear warmup schedule, clipping (bf16 autocast) ------------
class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=20, d=16, positions=8):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.h = nn.ModuleList([Block(d), Block(d)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, labels):
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        logits = logits.float() if logits.dtype == torch.bfloat16 else logits   # the loss in float32 under autocast
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def _linear_schedule_with_warmup(warmup: int, total: int):
    return lambda step: step / max(1, warmup) if step < warmup else max(0.0, (total - step) / max(1, total - warmup))


def _hf_build(dtype: torch.dtype):
    def build():
        torch.manual_seed(6)
        model = TinyCausalLM().to(dtype)
        no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "ln" in n]
        decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "ln" in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=5e-3)
        return {"model": model, "opt": opt, "scheduler": torch.optim.lr_scheduler.LambdaLR(opt, _linear_schedule_with_warmup(2, 6)),
                "autocast": dtype == torch.float32}
    return build


def _hf_batches():
    g = _gen(50)
    return [(torch.randint(0, 20, (GLOBAL_BATCH, 8), generator=g),) for _ in range(4)]


def _hf_step(state, batch, carry):
    (input_ids,) = batch
    model, opt = state["model"], state["opt"]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=state["autocast"]):
        loss = model(input_ids, labels=input_ids)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    state["scheduler"].step()
    opt.zero_grad()
    return loss.detach(), carry


PROGRAMS = [
    Program("mnist_cnn", _mnist_build, _mnist_batches, _mnist_step),
    Program("lstm_lm", _lstm_build, _lm_batches, _lm_train_step,
            initial_carry=lambda bsz: (torch.zeros(2, bsz, 12, dtype=F64), torch.zeros(2, bsz, 12, dtype=F64))),
    Program("transformer_lm", _transformer_build, _lm_batches, _lm_train_step),
    Program("vae", _vae_build, _pairs(30, torch.rand, 36, 4), _vae_step),
    Program("gan", _gan_build(False), _pairs(40, torch.randn, 12, 4), _gan_step, models=("netG", "netD")),
    Program("gan_batchnorm", _gan_build(True), _pairs(40, torch.randn, 12, 4), _gan_step, models=("netG", "netD"), compare_one_device=False),
    # AdamW divides each gradient by its own running norm: gradients near zero turn rounding-level
    # differences of the batch split (DDP's too: 7.5e-13 off one device) into ~1e-12 of the weights.
    Program("hf_float64", _hf_build(F64), _hf_batches, _hf_step, tolerance=1e-11),
    # bf16 matmuls over half a batch round differently from the whole batch (and the weight gradients
    # sum over the batch in another order): a few bf16 ulps, not 1e-12.
    Program("hf_bf16", _hf_build(torch.float32), _hf_batches, _hf_step, dtype=torch.float32, tolerance=2e-2),
]


def parameters_of(program: Program, state: dict) -> list:
    """The program's trained parameters, in a fixed order (a DDP wrapper's module's)."""
    out = []
    for name in program.models + program.averaged:
        model = state[name]
        out.extend(getattr(model, "module", model).parameters())
    return out
