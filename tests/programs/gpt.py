"""Karpathy's minGPT (mingpt/model.py, mingpt/trainer.py) and nanoGPT (model.py, train.py) training
steps as ``Program``s, float64, tiny (2 layers, width 16, 8 tokens):

* minGPT: ``_init_weights`` through ``self.apply`` and the scaled ``c_proj`` init in ``__init__`` (so
  inside the strategy's scope, after the parameters exist), ``configure_optimizers`` building its
  decay / no-decay sets from ``named_modules()`` x ``named_parameters()`` (Linear weights decay;
  biases, LayerNorm and Embedding weights do not), ``AdamW(betas=(0.9, 0.95))``, the trainer's
  ``zero_grad(set_to_none=True)``, ``clip_grad_norm_(..., 1.0)``; targets masked with -1 (the sort
  demo's prompt, ``ignore_index=-1``: as many per row, so replica means average to the global one).
* nanoGPT: weights tied (``wte.weight = lm_head.weight``), its bias-free LayerNorm,
  ``configure_optimizers`` by ``p.dim() >= 2`` over ``named_parameters()`` with ``requires_grad``,
  ``AdamW(fused=False)`` (its CPU choice), a disabled ``GradScaler`` around the step (train.py's
  ``enabled=(dtype == 'float16')``), ``get_num_params`` observed. nanoGPT's learning-rate loop and
  micro-steps are ``idioms.py``'s ``nanogpt_loop``.

This module imports only torch: the DDP runner must not import multidev.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen

VOCAB, BLOCK, EMBD, HEADS, LAYERS = 12, 8, 16, 2, 2


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm with an optional bias (PyTorch's has no bias=False in old versions)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, bias=True, flash=False):
        super().__init__()
        self.c_attn = nn.Linear(EMBD, 3 * EMBD, bias=bias)
        self.c_proj = nn.Linear(EMBD, EMBD, bias=bias)
        self.flash = flash
        if not flash:   # minGPT's mask, a buffer named "bias"
            self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(EMBD, dim=2)
        k, q, v = (z.view(B, T, HEADS, C // HEADS).transpose(1, 2) for z in (k, q, v))
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, norm, bias=True, flash=False):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = norm(), CausalSelfAttention(bias, flash), norm()
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(EMBD, 4 * EMBD, bias=bias), c_proj=nn.Linear(4 * EMBD, EMBD, bias=bias),
                                      act=nn.GELU(approximate="tanh"), dropout=nn.Dropout(0.0)))

    def forward(self, x):
        m = self.mlp
        x = x + self.attn(self.ln_1(x))
        return x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))


class GPT(nn.Module):
    """minGPT's GPT (``nano=False``) or nanoGPT's (tied weights, bias-free LayerNorm, flash attention)."""

    def __init__(self, nano=False):
        super().__init__()
        norm = (lambda: LayerNorm(EMBD, bias=False)) if nano else (lambda: nn.LayerNorm(EMBD))
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, EMBD), wpe=nn.Embedding(BLOCK, EMBD), drop=nn.Dropout(0.0),
            h=nn.ModuleList([Block(norm, bias=not nano, flash=nano) for _ in range(LAYERS)]), ln_f=norm()))
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        if nano:
            self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        return n_params - self.transformer.wpe.weight.numel() if non_embedding else n_params

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def mingpt_configure_optimizers(model, weight_decay=0.1, learning_rate=5e-3, betas=(0.9, 0.95)):
    """minGPT's ``GPT.configure_optimizers``, as written (sets of full parameter names)."""
    decay, no_decay = set(), set()
    whitelist_weight_modules = (torch.nn.Linear, )
    blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
    for mn, m in model.named_modules():
        for pn, p in m.named_parameters():
            fpn = "%s.%s" % (mn, pn) if mn else pn
            if pn.endswith("bias"):
                no_decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                no_decay.add(fpn)
    param_dict = {pn: p for pn, p in model.named_parameters()}
    inter_params, union_params = decay & no_decay, decay | no_decay
    assert len(inter_params) == 0, "parameters %s made it into both decay/no_decay sets!" % (str(inter_params), )
    assert len(param_dict.keys() - union_params) == 0, "parameters %s were not separated into either decay/no_decay set!" \
        % (str(param_dict.keys() - union_params), )
    optim_groups = [
        {"params": [param_dict[pn] for pn in sorted(list(decay))], "weight_decay": weight_decay},
        {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, fused=False)


def nanogpt_configure_optimizers(model, weight_decay=0.1, learning_rate=5e-3, betas=(0.9, 0.95), device_type="cpu"):
    """nanoGPT's ``GPT.configure_optimizers`` (fused only on CUDA)."""
    param_dict = {pn: p for pn, p in model.named_parameters()}
    param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
    decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                    {"params": nodecay_params, "weight_decay": 0.0}]
    extra_args = dict(fused=True) if device_type == "cuda" else dict(fused=False)
    return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)


def _build(nano: bool):
    def build():
        torch.manual_seed(80)
        model = GPT(nano).double()
        configure = nanogpt_configure_optimizers if nano else mingpt_configure_optimizers
        opt = configure(model)
        return {"model": model, "opt": opt, "scaler": torch.amp.GradScaler("cpu", enabled=False),
                "groups": [sum(p.numel() for p in g["params"]) for g in opt.param_groups]}
    return build


def _batches():
    g = _gen(81)
    out = []
    for _ in range(3):
        seq = torch.randint(0, VOCAB, (GLOBAL_BATCH, BLOCK + 1), generator=g)
        x, y = seq[:, :-1].clone(), seq[:, 1:].clone()
        y[:, :3] = -1   # the sort demo's prompt: no loss there (as many per row)
        out.append((x, y))
    return out


def _mingpt_step(state, batch, carry):
    """mingpt/trainer.py's loop body."""
    x, y = batch
    model, optimizer = state["model"], state["opt"]
    logits, loss = model(x, y)
    model.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach(), carry


def _nanogpt_step(state, batch, carry):
    """nanoGPT train.py's iteration with one micro-step: the scaler (disabled), unscale_, clipping."""
    x, y = batch
    model, optimizer, scaler = state["model"], state["opt"], state["scaler"]
    logits, loss = model(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), carry


def _sizes(state) -> list:
    """The decay / no-decay groups' sizes, nanoGPT's printed ``get_num_params()``, each step."""
    module = getattr(state["model"], "module", state["model"])
    return [float(n) for n in state["groups"]] + [float(module.get_num_params())]


GPT_PROGRAMS = [
    # AdamW over the 2 x 3 steps: gradients near zero magnify rounding as in hf_float64
    Program("mingpt_trainer", _build(False), _batches, _mingpt_step, tolerance=1e-11, observe=_sizes),
    Program("nanogpt_configure_optimizers", _build(True), _batches, _nanogpt_step, tolerance=1e-11, observe=_sizes),
]
