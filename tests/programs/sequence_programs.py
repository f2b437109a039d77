"""Public PyTorch sequence and attention programs as printed, with the port's changes only (``port``:
``pytutorials_run``'s DDP rank or strategy port), float64, small synthetic data:

* ``nn.MultiheadAttention`` used directly (``batch_first``, ``key_padding_mask``, a causal ``attn_mask``,
  ``need_weights`` with ``average_attn_weights=False``, the weights logged), trained, then evaluated in
  ``model.eval()`` under ``torch.no_grad()`` and ``torch.inference_mode()`` (torch's fused fast path);
* ``nn.TransformerEncoder(enable_nested_tensor=True)`` with ``src_key_padding_mask``: a classifier pooling
  every position (``out.mean(dim=1)``), trained, then evaluated in eval under ``no_grad`` (nested tensors:
  zeros at padded positions) and ``inference_mode``, inside ``strategy.run`` and outside it.

``sequence_programs2.py`` holds the translation tutorial, the GRU seq2seq and the char-RNN.
This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, SEQ, EMBED, HEADS, CLASSES = 8, 3, 6, 8, 2, 3


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def padded_features(seed: int, n: int = GLOBAL_BATCH * STEPS) -> TensorDataset:
    """Sequences of 2..SEQ feature vectors, right-padded (``True`` = padding), and a class each."""
    g = _gen(seed)
    x = torch.randn(n, SEQ, EMBED, generator=g, dtype=F64)
    lengths = torch.randint(2, SEQ + 1, (n,), generator=g)
    pad = torch.arange(SEQ)[None, :] >= lengths[:, None]
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return TensorDataset(x.masked_fill(pad[..., None], 0.0), pad, y)


def _eval_logs(port, loader, fn) -> dict:
    """``fn(x, pad)``'s outputs summed per batch, under ``no_grad`` and ``inference_mode``, in the step."""
    out = {}
    for name, grad_mode in (("no_grad", torch.no_grad), ("inference_mode", torch.inference_mode)):
        def step(x, pad, y, grad_mode=grad_mode):
            with grad_mode():
                return [o.sum() for o in fn(x, pad)] + [o.pow(2).sum() for o in fn(x, pad)]
        out[name] = [[port.sum(v) for v in port.run(step, args=batch)] for batch in port.distribute(loader)]
    return out


# --- nn.MultiheadAttention used directly -------------------------------------------------------------------
def mha_direct(port) -> dict:
    torch.manual_seed(3)
    loader = DataLoader(padded_features(4), batch_size=GLOBAL_BATCH)
    with port.scope():
        attn = nn.MultiheadAttention(EMBED, HEADS, dropout=0.1, batch_first=True).double()
        head = nn.Linear(EMBED, CLASSES).double()
        optimizer = torch.optim.Adam([*attn.parameters(), *head.parameters()], lr=1e-2)
    attn, head = port.wrap(attn), port.wrap(head)
    causal = nn.Transformer.generate_square_subsequent_mask(SEQ, dtype=torch.bool)   # bool mask for fast path

    def forward(x, pad, need_weights=True):
        out, weights = attn(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=need_weights,
                            average_attn_weights=False)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return head((out * keep).sum(1) / keep.sum(1)), weights

    def step(x, pad, y):
        optimizer.zero_grad()
        logits, weights = forward(x, pad)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        return loss.detach(), weights.detach()[:, :, -1].pow(2).sum(), weights.detach().mean(dim=(0, 1))[-1, 0]

    log, logged_weights = [], []
    for epoch in range(2):
        for batch in port.distribute(loader):
            loss, last_row, corner = port.run(step, args=batch)
            log.append([port.mean(loss), port.sum(last_row)])
            logged_weights.append(port.mean(corner))
    port.module(attn).eval(), port.module(head).eval()
    evals = _eval_logs(port, loader, lambda x, pad: [forward(x, pad, need_weights=False)[0],
                                                      attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]])
    with torch.no_grad():   # the whole set between epochs, outside strategy.run: every rank evaluates it all
        x, pad, _ = loader.dataset.tensors
        whole = attn(x, x, x, key_padding_mask=pad, need_weights=True)
    return {**port.weights(attn, head), "log": log, "attention": logged_weights, "evals": evals,
            "whole": [float(whole[0].sum()), float(whole[1].pow(2).sum())]}


# --- nn.TransformerEncoder with nested tensors ------------------------------------------------------------
class EncoderClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(EMBED, HEADS, dim_feedforward=16, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True)
        self.fc = nn.Linear(EMBED, CLASSES)

    def forward(self, x, src_key_padding_mask):
        out = self.encoder(x, src_key_padding_mask=src_key_padding_mask)
        return self.fc(out.mean(dim=1)), out


def encoder_nested(port) -> dict:
    torch.manual_seed(5)
    loader = DataLoader(padded_features(6), batch_size=GLOBAL_BATCH)
    with port.scope():
        model = EncoderClassifier().double()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model = port.wrap(model)

    def step(x, pad, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, src_key_padding_mask=pad)[0], y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    model.train()
    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    model.eval()
    evals = _eval_logs(port, loader, lambda x, pad: list(model(x, src_key_padding_mask=pad)))
    x, pad, _ = loader.dataset.tensors
    with torch.no_grad():
        logits, out = model(x, src_key_padding_mask=pad)
    return {**port.weights(model), "log": log, "evals": evals,
            "whole": [float(logits.sum()), float(out.pow(2).sum()), float(out[pad].abs().max())]}


SEQUENCE_PROGRAMS = {"mha_direct": mha_direct, "encoder_nested": encoder_nested}
