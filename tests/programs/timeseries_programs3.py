"""Recurrent programs whose weights are computed at each call, ported with two lines:

* AWD-LSTM's language model (salesforce/awd-lstm-lm): ``WeightDrop`` deletes ``weight_hh_l0`` from the LSTM,
  keeps ``weight_hh_l0_raw`` and sets ``module.weight_hh_l0 = F.dropout(raw_w, ...)`` before each forward (a
  DropConnect mask drawn per rank), the hidden state carried across BPTT windows and repackaged in the step;
* an ``nn.GRU`` with ``parametrizations.weight_norm(gru, "weight_hh_l0")`` and its state carried;
* an ``nn.LSTMCell`` unrolled over time with a weight-normed ``weight_hh``, the forward under
  ``with torch.nn.utils.parametrize.cached():`` (torch's docs: the weight computed once per forward).

Each is ``case(port) -> dict`` over ``timeseries_run``'s ports. Float64, synthetic seeded data, global batch 8.
Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils import parametrize as P
from torch.utils.data import DataLoader, TensorDataset

from timeseries_programs import BPTT, GLOBAL_BATCH, STEPS, _streams, repackage_hidden

F64 = torch.float64
NTOKEN = 10


def _token_streams(seed: int) -> DataLoader:
    """GLOBAL_BATCH token streams cut into BPTT windows, window k of every stream in batch k."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, NTOKEN, (GLOBAL_BATCH, STEPS * BPTT + 1), generator=g)
    x = tokens[:, :-1].reshape(GLOBAL_BATCH, STEPS, BPTT).transpose(0, 1).reshape(-1, BPTT)
    y = tokens[:, 1:].reshape(GLOBAL_BATCH, STEPS, BPTT).transpose(0, 1).reshape(-1, BPTT)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


class WeightDrop(torch.nn.Module):
    """awd-lstm-lm's weight_drop.py (its cuDNN workaround left out: CPU)."""

    def __init__(self, module, weights, dropout=0, variational=False):
        super(WeightDrop, self).__init__()
        self.module = module
        self.weights = weights
        self.dropout = dropout
        self.variational = variational
        self._setup()

    def _setup(self):
        for name_w in self.weights:
            print('Applying weight drop of {} to {}'.format(self.dropout, name_w))
            w = getattr(self.module, name_w)
            del self.module._parameters[name_w]
            self.module.register_parameter(name_w + '_raw', nn.Parameter(w.data))

    def _setweights(self):
        for name_w in self.weights:
            raw_w = getattr(self.module, name_w + '_raw')
            w = None
            if self.variational:
                mask = torch.ones(raw_w.size(0), 1, dtype=raw_w.dtype)
                mask = torch.nn.functional.dropout(mask, p=self.dropout, training=True)
                w = mask.expand_as(raw_w) * raw_w
            else:
                w = torch.nn.functional.dropout(raw_w, p=self.dropout, training=self.training)
            setattr(self.module, name_w, w)

    def forward(self, *args):
        self._setweights()
        return self.module.forward(*args)


class AWDModel(nn.Module):
    def __init__(self, ninp=6, nhid=6, wdrop=0.3):
        super().__init__()
        self.encoder = nn.Embedding(NTOKEN, ninp)
        self.rnn = WeightDrop(nn.LSTM(ninp, nhid, batch_first=True), ['weight_hh_l0'], dropout=wdrop)
        self.decoder = nn.Linear(nhid, NTOKEN)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden


def _carried_lm(port, model, optimizer, loader, loss_fn, epochs=2) -> list:
    def step(x, y, hidden):
        hidden = repackage_hidden(hidden) if hidden is not None else None
        optimizer.zero_grad()
        output, hidden = model(x, hidden)
        loss = loss_fn(output, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        return loss.detach(), hidden

    log = []
    for _ in range(epochs):
        hidden = None
        for batch in port.distribute(loader):
            loss, hidden = port.run(step, args=(*batch, hidden))
            log.append(port.mean(loss))
    return log


def awd_lstm_weight_drop(port) -> dict:
    torch.manual_seed(71)
    with port.scope():
        model = AWDModel().double()
        optimizer = optim.SGD(model.parameters(), lr=2.0)
    model = port.wrap(model)
    log = _carried_lm(port, model, optimizer, _token_streams(72),
                      lambda out, y: F.cross_entropy(out.reshape(-1, NTOKEN), y.reshape(-1)))
    after = port.run(lambda: torch.rand((), dtype=F64))   # each rank's random stream after the masks
    return {**port.weights(model), "log": log, "after": port.mean(after)}


class NormedGRU(nn.Module):
    def __init__(self, n_hidden=6):
        super().__init__()
        self.gru = nn.utils.parametrizations.weight_norm(nn.GRU(1, n_hidden, batch_first=True), "weight_hh_l0")
        self.fc = nn.Linear(n_hidden, 1)

    def forward(self, x, hidden):
        out, hidden = self.gru(x, hidden)
        return self.fc(out), hidden


def gru_weight_norm_carried(port) -> dict:
    torch.manual_seed(73)
    with port.scope():
        model = NormedGRU().double()
        optimizer = optim.Adam(model.parameters(), lr=0.03)
    model = port.wrap(model)
    return {**port.weights(model), "log": _carried_lm(port, model, optimizer, _streams(74), F.mse_loss)}


class NormedCellRNN(nn.Module):
    """An LSTMCell unrolled over the window; ``weight_hh`` weight-normed, read at every step."""

    def __init__(self, n_hidden=6):
        super().__init__()
        self.n_hidden = n_hidden
        self.cell = nn.utils.parametrizations.weight_norm(nn.LSTMCell(1, n_hidden), "weight_hh")
        self.fc = nn.Linear(n_hidden, 1)

    def forward(self, x):
        h = c = x.new_zeros(x.size(0), self.n_hidden)
        outputs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            outputs.append(self.fc(h))
        return torch.stack(outputs, dim=1)


def lstmcell_weight_norm_cached(port) -> dict:
    torch.manual_seed(75)
    with port.scope():
        model = NormedCellRNN().double()
        optimizer = optim.Adam(model.parameters(), lr=0.03)
    model = port.wrap(model)

    def step(x, y):
        optimizer.zero_grad()
        with P.cached():
            loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(_streams(76))]
    return {**port.weights(model), "log": log}


class BufferStateLSTM(nn.Module):
    """The state in non-persistent buffers sized for one rank's batch, replaced in ``forward``."""

    def __init__(self, batch_size, n_hidden=6):
        super().__init__()
        self.lstm = nn.LSTM(1, n_hidden, batch_first=True)
        self.fc = nn.Linear(n_hidden, 1)
        self.register_buffer("h", torch.zeros(1, batch_size, n_hidden), persistent=False)
        self.register_buffer("c", torch.zeros(1, batch_size, n_hidden), persistent=False)

    def forward(self, x):
        out, (h, c) = self.lstm(x, (self.h, self.c))
        self.h, self.c = h.detach(), c.detach()   # assigned to the buffers' names: torch replaces the buffers
        return self.fc(out)


def stateful_buffer_state(port) -> dict:
    """DDP broadcasts rank 0's buffers at every forward (``broadcast_buffers=True``): rank 1 runs on rank 0's
    state; per replica, each replica's own state is a buffer that differs between replicas."""
    torch.manual_seed(77)
    with port.scope():
        model = BufferStateLSTM(GLOBAL_BATCH // 2).double()
        optimizer = optim.Adam(model.parameters(), lr=0.03)
    model = port.wrap(model)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_streams(78))]
    return {**port.weights(model), "log": log}


TIMESERIES3 = {f.__name__: f for f in (awd_lstm_weight_drop, gru_weight_norm_carried, lstmcell_weight_norm_cached,
                                       stateful_buffer_state)}
