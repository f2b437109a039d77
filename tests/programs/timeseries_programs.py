"""Time-series programs as their public sources print them, ported with two lines (model and optimizer built in
``strategy.scope()``, the loop body in ``strategy.run`` over ``experimental_distribute_dataset``):

* a stateful LSTM trained with truncated BPTT, its hidden state carried from one window to the next: kept on the
  module (``self.hidden = tuple(h.detach() for h in hidden)`` in ``forward``), or in a variable of the loop
  (``strategy.run``'s output fed back, detached in the step or outside it), or made with
  ``model.init_hidden(batch_size)`` from the batch size the program computes (the loader's: the GLOBAL batch
  once ported);
* LSTM forecasting on sliding windows (``series.unfold``), an encoder-decoder with teacher forcing, and an
  encoder over variable-length windows with ``pack_padded_sequence(enforce_sorted=False)`` and
  ``pad_packed_sequence(total_length=...)``.

Each is ``case(port) -> dict`` over ``timeseries_run``'s ports (a DDP rank, or a strategy's port). Float64,
synthetic seeded data, global batch 8. Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, BPTT, STEPS = 8, 5, 4


def _streams(seed: int) -> DataLoader:
    """GLOBAL_BATCH noisy sine streams cut into BPTT windows: batch k holds window k of every stream, in stream
    order, so row i of batch k continues row i of batch k-1 (on each rank: its rows)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(STEPS * BPTT + 1, dtype=F64)
    phase = torch.rand(GLOBAL_BATCH, 1, generator=g, dtype=F64) * 6
    series = torch.sin(0.4 * t + phase) + 0.1 * torch.randn(GLOBAL_BATCH, len(t), generator=g, dtype=F64)
    x = series[:, :-1].reshape(GLOBAL_BATCH, STEPS, BPTT).transpose(0, 1).reshape(-1, BPTT, 1)
    y = series[:, 1:].reshape(GLOBAL_BATCH, STEPS, BPTT).transpose(0, 1).reshape(-1, BPTT, 1)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


class StatefulLSTM(nn.Module):
    """A stateful forecaster: the hidden state lives on the module and carries over to the next window."""

    def __init__(self, n_hidden=6, n_layers=1):
        super().__init__()
        self.n_hidden, self.n_layers = n_hidden, n_layers
        self.lstm = nn.LSTM(1, n_hidden, n_layers, batch_first=True)
        self.fc = nn.Linear(n_hidden, 1)
        self.hidden = None

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(self.n_layers, batch_size, self.n_hidden),
                weight.new_zeros(self.n_layers, batch_size, self.n_hidden))

    def reset_hidden(self, batch_size):
        self.hidden = self.init_hidden(batch_size)

    def forward(self, x):
        out, hidden = self.lstm(x, self.hidden)
        self.hidden = tuple(h.detach() for h in hidden)
        return self.fc(out)


class LSTMForecaster(nn.Module):
    """The same network taking and returning its state (``output, hidden = model(x, hidden)``)."""

    def __init__(self, n_hidden=6):
        super().__init__()
        self.n_hidden = n_hidden
        self.lstm = nn.LSTM(1, n_hidden, batch_first=True)
        self.fc = nn.Linear(n_hidden, 1)

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(1, batch_size, self.n_hidden), weight.new_zeros(1, batch_size, self.n_hidden))

    def forward(self, x, hidden):
        out, hidden = self.lstm(x, hidden)
        return self.fc(out), hidden


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history (word_language_model's)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def _build(port, cls, seed):
    torch.manual_seed(seed)
    with port.scope():
        model = cls().double()
        optimizer = optim.Adam(model.parameters(), lr=0.03)
    return port.wrap(model), optimizer


def _stateful_on_module(port, reset: str) -> dict:
    """Two epochs over the streams; the state reset at each epoch's start as ``reset`` says."""
    model, optimizer = _build(port, StatefulLSTM, 51)
    module, loader, log = port.module(model), _streams(52), []
    batch_size = loader.batch_size // port.loader_shares   # what the program computes: per rank under DDP

    def step(x, y):
        if reset == "in_step" and module.hidden is None:
            module.reset_hidden(x.size(0))
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss.detach()

    for _ in range(2):
        if reset == "init_hidden":
            module.reset_hidden(batch_size)
        else:
            module.hidden = None
        log += [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    return {**port.weights(model), "log": log}


def stateful_module_hidden(port) -> dict:
    """``self.hidden = None`` between epochs: the LSTM starts from zeros, then each replica carries its own."""
    return _stateful_on_module(port, "none")


def stateful_module_reset_in_step(port) -> dict:
    """``model.reset_hidden(x.size(0))`` in the step when the state is None (each replica's batch)."""
    return _stateful_on_module(port, "in_step")


def stateful_module_init_hidden(port) -> dict:
    """``model.reset_hidden(batch_size)`` before each epoch, from the loader's batch size: the global batch once
    ported (DDP's program divides by the ranks)."""
    return _stateful_on_module(port, "init_hidden")


def _carried(port, init: str, detach_outside: str = "") -> dict:
    """The state in a variable of the loop, fed to ``strategy.run`` and taken back from it."""
    model, optimizer = _build(port, LSTMForecaster, 53)
    loader, log = _streams(54), []
    batch_size = loader.batch_size // port.loader_shares

    def step(x, y, hidden):
        if hidden is None:
            hidden = port.module(model).init_hidden(x.size(0)) if init == "in_step" else None
        if not detach_outside:
            hidden = repackage_hidden(hidden) if hidden is not None else None
        optimizer.zero_grad()
        output, hidden = model(x, hidden)
        loss = F.mse_loss(output, y)
        loss.backward()
        optimizer.step()
        return loss.detach(), hidden

    for _ in range(2):
        hidden = port.module(model).init_hidden(batch_size) if init == "global" else None
        for batch in port.distribute(loader):
            loss, hidden = port.run(step, args=(*batch, hidden))
            if detach_outside == "as_printed":
                hidden = repackage_hidden(hidden)
            elif detach_outside == "in_run":   # the port's line: each replica detaches its own
                hidden = port.run(repackage_hidden, args=(hidden,))
            log.append(port.mean(loss))
    return {**port.weights(model), "log": log}


def carried_hidden(port) -> dict:
    return _carried(port, "none")


def carried_hidden_init_in_step(port) -> dict:
    return _carried(port, "in_step")


def carried_hidden_detached_outside(port) -> dict:
    """``hidden = repackage_hidden(hidden)`` between runs, on what ``strategy.run`` gave back (per replica)."""
    return _carried(port, "in_step", detach_outside="as_printed")


def carried_hidden_detached_in_run(port) -> dict:
    """The port of the line above: ``hidden = strategy.run(repackage_hidden, args=(hidden,))``."""
    return _carried(port, "in_step", detach_outside="in_run")


def carried_hidden_global_init(port) -> dict:
    """``hidden = model.init_hidden(batch_size)`` before the loop, batch_size the loader's (the global batch)."""
    return _carried(port, "global")


# --- forecasting on sliding windows ---------------------------------------------------------------------------
WINDOW, HORIZON = 6, 3


def _windows(seed: int, with_lengths: bool = False) -> DataLoader:
    """``series.unfold(0, WINDOW + HORIZON, 1)``: inputs, targets, and a length per window (the last ``length``
    steps of each input are real, padded at the end after shifting left)."""
    g = torch.Generator().manual_seed(seed)
    n = STEPS * GLOBAL_BATCH
    t = torch.arange(n + WINDOW + HORIZON - 1, dtype=F64)
    series = torch.sin(0.3 * t) + 0.5 * torch.cos(0.11 * t) + 0.05 * torch.randn(len(t), generator=g, dtype=F64)
    windows = series.unfold(0, WINDOW + HORIZON, 1)[torch.randperm(n, generator=g)]
    x, y = windows[:, :WINDOW, None], windows[:, WINDOW:, None]
    if not with_lengths:
        return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)
    lengths = torch.randint(2, WINDOW + 1, (n,), generator=g)
    padded = torch.zeros_like(x)
    for i, length in enumerate(lengths.tolist()):
        padded[i, :length] = x[i, WINDOW - length:]
    return DataLoader(TensorDataset(padded, y, lengths), batch_size=GLOBAL_BATCH)


class Seq2SeqForecaster(nn.Module):
    """An LSTM encoder, and a decoder cell fed the true previous value while training (teacher forcing) and its
    own prediction otherwise."""

    def __init__(self, n_hidden=6):
        super().__init__()
        self.encoder = nn.LSTM(1, n_hidden, batch_first=True)
        self.decoder = nn.LSTMCell(1, n_hidden)
        self.out = nn.Linear(n_hidden, 1)

    def forward(self, x, target=None, teacher_forcing=True):
        _, (h, c) = self.encoder(x)
        h, c = h[0], c[0]
        dec_input, outputs = x[:, -1], []
        for t in range(HORIZON):
            h, c = self.decoder(dec_input, (h, c))
            pred = self.out(h)
            outputs.append(pred)
            dec_input = target[:, t] if teacher_forcing and target is not None else pred
        return torch.stack(outputs, dim=1)


def forecast_teacher_forcing(port) -> dict:
    model, optimizer = _build(port, Seq2SeqForecaster, 55)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x, y, teacher_forcing=True), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def evaluate(x, y):
        with torch.no_grad():
            return F.mse_loss(model(x, teacher_forcing=False), y, reduction="sum")

    loader = _windows(56)
    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    error = sum(port.sum(port.run(evaluate, args=batch)) for batch in port.distribute(loader))
    return {**port.weights(model), "log": log, "eval": error}


class PackedEncoder(nn.Module):
    """Variable-length windows through ``pack_padded_sequence(enforce_sorted=False)``; a per-step head over
    ``pad_packed_sequence(total_length=...)`` and a forecast from the last hidden state."""

    def __init__(self, n_hidden=6):
        super().__init__()
        self.lstm = nn.LSTM(1, n_hidden, batch_first=True)
        self.step_head = nn.Linear(n_hidden, 1)
        self.head = nn.Linear(n_hidden, HORIZON)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, (h, _) = self.lstm(packed)
        out, out_lengths = pad_packed_sequence(packed_out, batch_first=True, total_length=x.size(1))
        return self.step_head(out), self.head(h[-1]), out_lengths


def forecast_packed(port) -> dict:
    model, optimizer = _build(port, PackedEncoder, 57)

    def step(x, y, lengths):
        optimizer.zero_grad()
        per_step, forecast, out_lengths = model(x, lengths)
        mask = (torch.arange(x.size(1))[None, :] < out_lengths[:, None]).unsqueeze(-1)
        next_value = torch.cat([x[:, 1:], y[:, :1]], dim=1)   # the padded tail's targets are masked out
        step_loss = ((per_step - next_value) ** 2 * mask).sum() / mask.sum()
        loss = step_loss + F.mse_loss(forecast, y[..., 0])
        loss.backward()
        optimizer.step()
        return loss.detach()

    loader = _windows(58, with_lengths=True)
    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]
    return {**port.weights(model), "log": log}


TIMESERIES = {f.__name__: f for f in (
    stateful_module_hidden, stateful_module_reset_in_step, stateful_module_init_hidden,
    carried_hidden, carried_hidden_init_in_step, carried_hidden_detached_outside, carried_hidden_detached_in_run,
    carried_hidden_global_init,
    forecast_teacher_forcing, forecast_packed)}
