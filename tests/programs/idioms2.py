"""More idioms of public DDP programs, as ``programs.py``'s ``Program``s (same runners), float64:
activation checkpointing (``torch.utils.checkpoint``, reentrant or not), a head unused on some steps
(DDP's ``find_unused_parameters``), GAN discriminators under ``parametrizations.spectral_norm`` and
generators under ``parametrizations.weight_norm``, ``convert_sync_batchnorm`` before the wrap,
WGAN-GP's gradient penalty (``torch.autograd.grad(create_graph=True)``, then one backward),
gradient hooks on parameters and modules, ``clip_grad_norm_``'s total norm logged with a disabled
``GradScaler``, ``model.to("cpu").to(memory_format=torch.channels_last)``, ``model.to(torch.bfloat16)``
after building, packed sequences, a token loss with ``ignore_index``; refused with the fix:
``EmbeddingBag(max_norm=...)`` (its forward writes the weight) and a step that all-reduces its own
loss with ``torch.distributed`` for logging.
This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parametrizations
from torch.utils.checkpoint import checkpoint

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen


def _batches(seed, steps=3, width=6, classes=3):
    def batches():
        g = _gen(seed)
        return [(torch.randn(GLOBAL_BATCH, width, generator=g, dtype=F64),
                 torch.randint(0, classes, (GLOBAL_BATCH,), generator=g)) for _ in range(steps)]
    return batches


class Log:
    """What a step logs, kept on an object (the runners hand ``state`` to ``strategy.run``, whose
    arguments' dicts are each replica's own)."""


def plain_step(state, batch, carry):
    """The mnist example's step (cross-entropy), for the idioms of the model or optimizer (also idioms.py's)."""
    x, y = batch
    state["opt"].zero_grad()
    loss = F.cross_entropy(state["model"](x), y)
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


# --- activation checkpointing in the model's forward (Hugging Face's gradient_checkpointing, timm) ----------
class CheckpointedNet(nn.Module):
    def __init__(self, reentrant: bool):
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.GELU()) for _ in range(2))
        self.head = nn.Linear(8, 3)
        self.reentrant = reentrant

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = x + checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


def _checkpointed(reentrant: bool):
    def build():
        torch.manual_seed(20)
        model = CheckpointedNet(reentrant).double()
        return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}
    return build


# --- a head used on even steps only: DDP needs find_unused_parameters=True --------------------------------
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head_a, self.head_b = nn.Linear(8, 3), nn.Linear(8, 3)

    def forward(self, x, use_b: bool):
        h = torch.tanh(self.body(x))
        return self.head_b(h) if use_b else self.head_a(h)


def _two_heads_build():
    torch.manual_seed(21)
    model = TwoHeads().double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}


def _two_heads_step(state, batch, carry):
    """Multi-task training: each step's task picks the head (the step's index, carried)."""
    (i,) = carry
    x, y = batch
    state["opt"].zero_grad()
    loss = F.cross_entropy(state["model"](x, use_b=int(i) % 2 == 1), y)
    loss.backward()
    state["opt"].step()
    return loss.detach(), (i + 1,)


# --- SNGAN: a spectral-normalised discriminator, a weight-normalised generator, hinge loss ---------------
def _sngan_build():
    torch.manual_seed(22)
    sn, wn = parametrizations.spectral_norm, parametrizations.weight_norm
    netG = nn.Sequential(wn(nn.Linear(4, 12)), nn.ReLU(), wn(nn.Linear(12, 6))).double()
    netD = nn.Sequential(sn(nn.Linear(6, 12)), nn.LeakyReLU(0.2), sn(nn.Linear(12, 1))).double()
    return {"netG": netG, "netD": netD, "optG": torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.0, 0.9)),
            "optD": torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.0, 0.9))}


def _gan_batches(seed, steps=3):
    def batches():
        g = _gen(seed)
        return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randn(GLOBAL_BATCH, 4, generator=g, dtype=F64),
                 torch.rand(GLOBAL_BATCH, 1, generator=g, dtype=F64)) for _ in range(steps)]
    return batches


def _sngan_step(state, batch, carry):
    real, noise, _ = batch
    netG, netD, optG, optD = state["netG"], state["netD"], state["optG"], state["optD"]
    optD.zero_grad()
    fake = netG(noise)
    lossD = F.relu(1.0 - netD(real)).mean() + F.relu(1.0 + netD(fake.detach())).mean()
    lossD.backward()
    optD.step()
    optG.zero_grad()
    lossG = -netD(fake).mean()
    lossG.backward()
    optG.step()
    return (lossD + lossG).detach(), carry


def _sngan_buffers(state) -> list:
    """The discriminator's power-iteration vectors (``_u``, ``_v``), updated by every forward."""
    module = getattr(state["netD"], "module", state["netD"])
    return [float(b.detach().double().sum()) for name, b in module.named_buffers() if name.endswith(("_u", "_v"))]


# --- WGAN-GP: the critic's gradient penalty through torch.autograd.grad(create_graph=True) ---------------
def _wgan_gp_build():
    torch.manual_seed(23)
    netG = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 6)).double()
    netD = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1)).double()
    return {"netG": netG, "netD": netD, "optG": torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9)),
            "optD": torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))}


def _gradient_penalty(netD, real, fake, alpha):
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = netD(interpolates)
    gradients = torch.autograd.grad(outputs=out, inputs=interpolates, grad_outputs=torch.ones_like(out),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * 10.0


def _wgan_gp_step(state, batch, carry):
    real, noise, alpha = batch
    netG, netD, optG, optD = state["netG"], state["netD"], state["optG"], state["optD"]
    optD.zero_grad()
    fake = netG(noise).detach()
    lossD = netD(fake).mean() - netD(real).mean() + _gradient_penalty(netD, real, fake, alpha)
    lossD.backward()
    optD.step()
    optG.zero_grad()
    lossG = -netD(netG(noise)).mean()
    lossG.backward()
    optG.step()
    return (lossD + lossG).detach(), carry


# --- convert_sync_batchnorm before the wrap (torchvision's --sync-bn) --------------------------------------
def _sync_bn_build():
    torch.manual_seed(24)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)).double()
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}


def _sync_bn_observe(state) -> list:
    """The running statistics (the global batch's on every replica: no mean of replicas' to hide a difference)."""
    module = getattr(state["model"], "module", state["model"])
    return [float(module[1].running_mean.sum()), float(module[1].running_var.sum())]


# --- gradient hooks: a tensor hook on a parameter, a module's full backward hook ------------------------
def _hooked_build(nonlinear: bool):
    def build():
        torch.manual_seed(25)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
        if nonlinear:   # clamps each process's gradient before DDP averages them
            model[0].weight.register_hook(lambda grad: grad.clamp(-0.02, 0.02))
        else:
            model[0].weight.register_hook(lambda grad: grad * 0.5)
        # a module's backward hook rescaling the gradient that flows into it (into model[0])
        model[2].register_full_backward_hook(lambda module, grad_input, grad_output: (grad_input[0] * 2.0,))
        return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.2)}
    return build


# --- clip_grad_norm_'s total norm logged, GradScaler(enabled=False) (train scripts with --amp off) ---------
def _norm_logged_build():
    torch.manual_seed(26)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.3),
            "scaler": torch.amp.GradScaler("cpu", enabled=False), "log": Log()}


def _norm_logged_step(state, batch, carry):
    x, y = batch
    model, opt, scaler = state["model"], state["opt"], state["scaler"]
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(opt)
    scaler.update()
    state["log"].grad_norm = float(total_norm)   # logged: the global gradient's norm on every replica
    return loss.detach(), carry


# --- .to(device) kept from the DDP program, channels_last ---------------------------------------------------
def _channels_last_build():
    torch.manual_seed(27)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).double()
    model = model.to("cpu").to(memory_format=torch.channels_last)   # `.to(gpu_id)` on a CPU
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}


def _image_batches():
    g = _gen(70)
    return [(torch.randn(GLOBAL_BATCH, 2, 5, 5, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(3)]


def _channels_last_step(state, batch, carry):
    x, y = batch
    return plain_step(state, (x.to("cpu", memory_format=torch.channels_last), y), carry)


# --- a step that reduces its own metric with torch.distributed (apex/ImageNet's reduce_tensor) ----------
def _reduce_own_metric_step(state, batch, carry):
    loss, carry = plain_step(state, batch, carry)
    reduced = loss.clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    reduced /= dist.get_world_size()
    state["log"].loss, state["log"].rank = float(reduced), dist.get_rank()   # `if rank == 0: print(...)`
    return loss, carry


# --- model.to(torch.bfloat16) after it is built, the batch cast in the step -----------------------------
def _bf16_build():
    torch.manual_seed(29)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(torch.bfloat16)
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.25)}


def _bf16_step(state, batch, carry):
    x, y = batch
    loss, carry = plain_step(state, (x.to(torch.bfloat16), y), carry)
    return loss.float(), carry


# --- nn.EmbeddingBag(max_norm=...): the forward renormalises the looked-up rows of the weight in place -------
def _max_norm_build():
    torch.manual_seed(30)
    model = nn.Sequential(nn.EmbeddingBag(12, 5, mode="mean", max_norm=1.0), nn.Linear(5, 3)).double()
    with torch.no_grad():
        model[0].weight.mul_(3.0)   # rows longer than max_norm: the first lookup of each rescales it
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1)}


def _token_batches(seed, steps=3):
    def batches():
        g = _gen(seed)
        return [(torch.randint(0, 12, (GLOBAL_BATCH, 3), generator=g), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
                for _ in range(steps)]
    return batches


# --- pack_padded_sequence over each batch's lengths (enforce_sorted=False), an LSTM classifier ---------------
class PackedLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 5)
        self.rnn = nn.LSTM(5, 6, batch_first=True)
        self.fc = nn.Linear(6, 3)

    def forward(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(ids), lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.rnn(packed)
        return self.fc(h[-1])


def _packed_build():
    torch.manual_seed(31)
    model = PackedLstm().double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)}


def _packed_batches():
    g = _gen(88)
    return [(torch.randint(1, 12, (GLOBAL_BATCH, 5), generator=g), torch.randint(1, 6, (GLOBAL_BATCH,), generator=g),
             torch.randint(0, 3, (GLOBAL_BATCH,), generator=g)) for _ in range(3)]


def _packed_step(state, batch, carry):
    ids, lengths, y = batch
    state["opt"].zero_grad()
    loss = F.cross_entropy(state["model"](ids, lengths), y)
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


# --- token classification with padding: cross_entropy(ignore_index=-100), a mean over each batch's tokens -----
def _tagger_build():
    torch.manual_seed(32)
    model = nn.Sequential(nn.Embedding(12, 5), nn.Linear(5, 4)).double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.5)}


def _tagged_batches():
    g = _gen(89)
    out = []
    for _ in range(3):
        ids, tags = torch.randint(0, 12, (GLOBAL_BATCH, 5), generator=g), torch.randint(0, 4, (GLOBAL_BATCH, 5), generator=g)
        tags[torch.rand(GLOBAL_BATCH, 5, generator=g) < 0.4] = -100   # padding: a different count per half
        out.append((ids, tags))
    return out


def _tagger_step(state, batch, carry):
    ids, tags = batch
    state["opt"].zero_grad()
    logits = state["model"](ids)
    loss = F.cross_entropy(logits.reshape(-1, 4), tags.reshape(-1), ignore_index=-100)
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


def _mlp_build(seed, make_opt=lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)):
    def build():
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
        return {"model": model, "opt": make_opt(model.parameters()), "log": Log()}
    return build


COUNTER = lambda batch_size: (torch.zeros((), dtype=F64),)   # noqa: E731 - the step's index, carried
UNUSED_DDP = "Expected to have finished reduction in the prior iteration before starting a new one"
SYNC_BN_DDP = "SyncBatchNorm layers only work with GPU modules"   # torch's SyncBatchNorm: CUDA only
MAX_NORM = (r"^ValueError: nn.EmbeddingBag\(max_norm=1.0\) built in \w+Strategy.scope\(\) \(\d replicas\): .*"
            r"torch.renorm\(emb.weight, 2, 0, 1.0\)")
MAX_NORM_DDP = "each DDP rank renormalises the rows of its own half in its own weight: the ranks drift apart"
TORCH_DISTRIBUTED = (r"^ValueError: torch.distributed.all_reduce inside strategy.run: .*get_replica_context\(\)"
                     r".all_reduce\('sum', value\).*strategy.reduce\('mean', value, axis=None\)")

IDIOMS2 = [
    Program("checkpoint_non_reentrant", _checkpointed(False), _batches(80), plain_step),
    Program("checkpoint_reentrant", _checkpointed(True), _batches(80), plain_step),
    Program("unused_head_find_unused", _two_heads_build, _batches(81, steps=4), _two_heads_step, initial_carry=COUNTER,
            ddp_kwargs={"find_unused_parameters": True}),
    Program("unused_head", _two_heads_build, _batches(81, steps=4), _two_heads_step, initial_carry=COUNTER,
            ddp_refused=UNUSED_DDP),
    # Adam divides gradients near zero by their running norm: the batch split's rounding grows to 4e-12 of
    # the weights (DDP's distance from one device too; multidev equals DDP bit for bit)
    Program("sngan_spectral_weight_norm", _sngan_build, _gan_batches(82), _sngan_step, models=("netG", "netD"),
            observe=_sngan_buffers, tolerance=1e-10),
    # Adam, as SN-GAN's: rounding differences of near-zero gradients grow (one device vs the halves)
    Program("wgan_gp", _wgan_gp_build, _gan_batches(83), _wgan_gp_step, models=("netG", "netD"), tolerance=1e-10),
    Program("sync_batchnorm_converted", _sync_bn_build, _batches(84), plain_step, observe=_sync_bn_observe,
            ddp_refused=SYNC_BN_DDP),
    Program("param_and_module_hooks", _hooked_build(False), _batches(85), plain_step),
    # clamped per process, then averaged (DDP's order): no one-device step
    Program("clamping_param_hook", _hooked_build(True), _batches(85), plain_step, compare_one_device=False),
    Program("clip_norm_logged_scaler_off", _norm_logged_build, _batches(86), _norm_logged_step,
            observe=lambda state: [state["log"].grad_norm]),
    Program("channels_last_to_cpu", _channels_last_build, _image_batches, _channels_last_step),
    # each DDP rank's bf16 gradient halved then summed equals multidev's sum then halved (a power of two)
    Program("bf16_model_after_build", _bf16_build, _batches(90), _bf16_step, dtype=torch.bfloat16, tolerance=1e-2,
            compare_one_device=False),
    Program("embedding_bag_max_norm", _max_norm_build, _token_batches(91), plain_step, refused=MAX_NORM,
            workers_refused=MAX_NORM, ddp_differs=MAX_NORM_DDP),
    Program("packed_sequence_lstm", _packed_build, _packed_batches, _packed_step),
    # each rank's mean over its own unpadded tokens, the gradients averaged (DDP's): no one-device mean
    Program("ignore_index_token_mean", _tagger_build, _tagged_batches, _tagger_step, compare_one_device=False),
    Program("torch_distributed_metric", _mlp_build(28), _batches(87), _reduce_own_metric_step,
            refused=TORCH_DISTRIBUTED, workers_refused=TORCH_DISTRIBUTED, observe=lambda state: [state["log"].loss]),
]
