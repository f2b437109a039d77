"""Audio and temporal-convolution programs as their public sources print them, ported with two lines:

* a log-mel front end in the model (``torch.stft`` with a Hann window buffer, a hand-written triangular mel
  filterbank as a buffer), SpecAugment's frequency and time masks drawn with ``torch.randint`` in the step
  (each rank, seeded alike, draws its own), a small CNN classifier;
* WaveNet-style gated, dilated causal ``Conv1d`` with left padding (``F.pad(x, (dilation * (k - 1), 0))``),
  residual and skip connections, predicting the next sample;
* locuslab's Temporal Convolutional Network (``TemporalBlock``: ``weight_norm`` convolutions, ``Chomp1d``,
  dropout, a 1x1 downsample), with torch's legacy ``nn.utils.weight_norm`` as printed and with
  ``nn.utils.parametrizations.weight_norm``.

Each is ``case(port) -> dict`` over ``timeseries_run``'s ports. Float64, synthetic seeded data, global batch 8.
Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS = 8, 4
SAMPLES, N_FFT, HOP, N_MELS, CLASSES = 256, 32, 16, 6, 3


def _audio(seed: int) -> DataLoader:
    """Clips of a tone whose pitch is the class, plus noise."""
    g = torch.Generator().manual_seed(seed)
    n = STEPS * GLOBAL_BATCH
    label = torch.randint(0, CLASSES, (n,), generator=g)
    t = torch.arange(SAMPLES, dtype=F64) / SAMPLES
    freq = (4 + 6 * label.to(F64))[:, None]
    wave = torch.sin(2 * math.pi * freq * t) + 0.3 * torch.randn(n, SAMPLES, generator=g, dtype=F64)
    return DataLoader(TensorDataset(wave, label), batch_size=GLOBAL_BATCH)


def hz_to_mel(f):
    return 2595.0 * torch.log10(1.0 + f / 700.0)


def mel_to_hz(m):
    return 700.0 * (10 ** (m / 2595.0) - 1.0)


def mel_filterbank(n_freqs, n_mels, sample_rate, dtype=F64):
    """Triangular filters evenly spaced on the mel scale, (n_mels, n_freqs)."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=dtype)
    m_pts = torch.linspace(hz_to_mel(torch.tensor(0.0, dtype=dtype)),
                           hz_to_mel(torch.tensor(sample_rate / 2, dtype=dtype)), n_mels + 2, dtype=dtype)
    f_pts = mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.min(down, up), min=0).t()


class LogMel(nn.Module):
    def __init__(self, sample_rate=SAMPLES):
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT, dtype=F64))
        self.register_buffer("fb", mel_filterbank(N_FFT // 2 + 1, N_MELS, sample_rate))

    def forward(self, wave):
        spec = torch.stft(wave, N_FFT, hop_length=HOP, window=self.window, return_complex=True)
        power = spec.abs().pow(2)                     # (N, freqs, frames)
        return torch.log(self.fb @ power + 1e-6)      # (N, mels, frames)


def spec_augment(spec, freq_mask=2, time_mask=3):
    """SpecAugment's masks, one band of each per clip, drawn with ``torch.randint``."""
    spec = spec.clone()
    n, n_mels, frames = spec.shape
    for i in range(n):
        f = torch.randint(0, freq_mask + 1, (1,)).item()
        f0 = torch.randint(0, n_mels - f + 1, (1,)).item()
        spec[i, f0:f0 + f, :] = 0
        t = torch.randint(0, time_mask + 1, (1,)).item()
        t0 = torch.randint(0, frames - t + 1, (1,)).item()
        spec[i, :, t0:t0 + t] = 0
    return spec


class AudioClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = LogMel()
        self.conv = nn.Conv1d(N_MELS, 8, 3, padding=1)
        self.bn = nn.BatchNorm1d(8)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, wave, augment=False):
        spec = self.features(wave)
        if augment and self.training:
            spec = spec_augment(spec)
        h = F.relu(self.bn(self.conv(spec)))
        return self.fc(h.mean(dim=-1))


def _train_classifier(port, model, optimizer, loader, forward) -> list:
    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(loader)]


def logmel_specaugment(port) -> dict:
    torch.manual_seed(61)
    with port.scope():
        model = AudioClassifier().double()
        optimizer = optim.Adam(model.parameters(), lr=0.02)
    model = port.wrap(model)
    log = _train_classifier(port, model, optimizer, _audio(62), lambda x: model(x, augment=True))
    after = port.run(lambda: torch.rand(2, dtype=F64).sum())   # the random stream after training: each rank's
    return {**port.weights(model), "log": log, "after": port.mean(after)}


class CausalConv1d(nn.Conv1d):
    """Left padding only: the output at t sees inputs up to t."""

    def __init__(self, in_channels, out_channels, kernel_size, dilation=1):
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation)
        self.left = dilation * (kernel_size - 1)

    def forward(self, x):
        return super().forward(F.pad(x, (self.left, 0)))


class ResidualBlock(nn.Module):
    def __init__(self, channels, dilation):
        super().__init__()
        self.filter = CausalConv1d(channels, channels, 2, dilation)
        self.gate = CausalConv1d(channels, channels, 2, dilation)
        self.residual = nn.Conv1d(channels, channels, 1)
        self.skip = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        z = torch.tanh(self.filter(x)) * torch.sigmoid(self.gate(x))
        return x + self.residual(z), self.skip(z)


class WaveNet(nn.Module):
    def __init__(self, channels=6, dilations=(1, 2, 4, 8)):
        super().__init__()
        self.input = CausalConv1d(1, channels, 2)
        self.blocks = nn.ModuleList(ResidualBlock(channels, d) for d in dilations)
        self.output = nn.Sequential(nn.ReLU(), nn.Conv1d(channels, channels, 1), nn.ReLU(), nn.Conv1d(channels, 1, 1))

    def forward(self, x):
        x = self.input(x)
        skips = 0
        for block in self.blocks:
            x, skip = block(x)
            skips = skips + skip
        return self.output(skips)


def wavenet_causal(port) -> dict:
    torch.manual_seed(63)
    with port.scope():
        model = WaveNet().double()
        optimizer = optim.Adam(model.parameters(), lr=0.01)
    model = port.wrap(model, find_unused_parameters=True)   # the last block's residual output is not used

    def step(wave, _):
        x = wave[:, None, :64]
        optimizer.zero_grad()
        loss = F.mse_loss(model(x)[:, :, :-1], x[:, :, 1:])
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_audio(64))]
    return {**port.weights(model), "log": log}


# --- locuslab/TCN's tcn.py ------------------------------------------------------------------------------------
class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2, weight_norm=None):
        super(TemporalBlock, self).__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2, weight_norm=None):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout,
                                     weight_norm=weight_norm)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    """locuslab's sequence classifier: the TCN, then a linear layer on the last step."""

    def __init__(self, weight_norm):
        super().__init__()
        self.tcn = TemporalConvNet(1, [6, 6, 6], kernel_size=2, dropout=0.2, weight_norm=weight_norm)
        self.linear = nn.Linear(6, CLASSES)

    def forward(self, inputs):
        y1 = self.tcn(inputs)
        return F.log_softmax(self.linear(y1[:, :, -1]), dim=1)


def _tcn(port, weight_norm) -> dict:
    torch.manual_seed(65)
    with port.scope():
        model = TCN(weight_norm).double()
        optimizer = optim.Adam(model.parameters(), lr=0.02)
    model = port.wrap(model)

    def step(wave, label):
        optimizer.zero_grad()
        loss = F.nll_loss(model(wave[:, None, ::4]), label)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    def evaluate(wave, label):
        with torch.no_grad():
            return (model(wave[:, None, ::4]).argmax(1) == label).sum()

    log = [port.mean(port.run(step, args=batch)) for _ in range(2) for batch in port.distribute(_audio(66))]
    port.module(model).eval()
    correct = sum(port.sum(port.run(evaluate, args=batch)) for batch in port.distribute(_audio(66)))
    return {**port.weights(model), "log": log, "correct": correct}


def tcn_weight_norm_legacy(port) -> dict:
    """As printed: ``from torch.nn.utils import weight_norm``."""
    return _tcn(port, nn.utils.weight_norm)


def tcn_weight_norm_parametrizations(port) -> dict:
    """torch's current ``nn.utils.parametrizations.weight_norm`` (``original0`` / ``original1``)."""
    return _tcn(port, nn.utils.parametrizations.weight_norm)


TIMESERIES2 = {f.__name__: f for f in (
    logmel_specaugment, wavenet_causal, tcn_weight_norm_legacy, tcn_weight_norm_parametrizations)}
