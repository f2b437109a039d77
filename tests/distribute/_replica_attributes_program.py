"""Run by test_replica_attributes.py in a fresh interpreter (2 logical CPUs): modules that store tensors on
themselves inside ``strategy.run``, against one device (mean losses over equal halves: DDP's result up
to float reassociation) or against DDP's ranks simulated by hand (two module copies, averaged gradients)
where each rank's state differs. Prints one JSON object: case -> result."""

from __future__ import annotations

import copy
import gc
import io
import json
import time

import torch
from torch import nn
from torch.nn.utils import prune

import multidev as md

F64 = torch.float64
torch.set_default_dtype(F64)
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
g = torch.Generator().manual_seed(1)
BATCHES = [torch.randn(8, 4, generator=g) for _ in range(4)]
RESULTS: dict = {}


def halves(x):
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: x[4 * ctx.replica_id_in_sync_group:4 * ctx.replica_id_in_sync_group + 4])


def linger_in_replica_0():
    """Replica 0 waits after its write, so the other replica's write lands before replica 0 reads."""
    ctx = md.distribute.get_replica_context()
    if ctx is not None and ctx.replica_id_in_sync_group == 0:
        time.sleep(0.02)


def max_diff(model, reference):
    ours, theirs = model.state_dict(), reference.state_dict()
    assert sorted(ours) == sorted(theirs), (sorted(ours), sorted(theirs))
    return max((torch.as_tensor(ours[k]) - v).abs().max().item() for k, v in theirs.items())


def train(model, optimizer, loss_of, distributed):
    def step(x):
        optimizer.zero_grad()
        loss = loss_of(model, x)
        loss.backward()
        optimizer.step()
        return loss
    for x in BATCHES:
        strategy.run(step, args=(halves(x),)) if distributed else step(x)


def case(function):
    try:
        RESULTS[function.__name__] = function()
    except Exception as e:   # reported per case: one failure does not hide the others
        RESULTS[function.__name__] = {"error": f"{type(e).__name__}: {e}"}
    return function


class LingeringPrune(prune.L1Unstructured):
    """torch's L1 pruning, its forward pre-hook's write of ``module.weight`` widened."""

    def __call__(self, module, inputs):
        super().__call__(module, inputs)
        linger_in_replica_0()


@case
def legacy_transforms():
    """Legacy weight_norm, spectral_norm and prune's pre-hooks write module.weight before each forward."""
    def build():
        torch.manual_seed(0)
        net = nn.Sequential(nn.utils.weight_norm(nn.Linear(4, 16)), nn.Tanh(),
                            nn.utils.spectral_norm(nn.Linear(16, 16)), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                            nn.Linear(8, 3))
        LingeringPrune.apply(net[4], "weight", amount=0.4)
        prune.global_unstructured([(net[6], "weight"), (net[6], "bias")], prune.L1Unstructured, amount=0.3)
        return net

    def loss_of(model, x):
        return model(x).pow(2).mean()

    with strategy.scope():
        model = build()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    reference = build()
    train(model, optimizer, loss_of, True)
    train(reference, torch.optim.Adam(reference.parameters(), lr=0.01), loss_of, False)
    trained = max_diff(model, reference)
    for net in (model, reference):
        nn.utils.remove_weight_norm(net[0])
        nn.utils.remove_spectral_norm(net[2])
        prune.remove(net[4], "weight")
        prune.remove(net[6], "weight")
        prune.remove(net[6], "bias")
    return {"trained": trained, "removed": max_diff(model, reference),
            "removed_keys": sorted(model.state_dict()), "weight_readable": tuple(model[4].weight.shape)}


class KeepsHidden(nn.Module):
    """``self.hidden`` stored in forward and read by the loss; ``self.attention`` kept for logging."""

    def __init__(self):
        super().__init__()
        self.encoder, self.head = nn.Linear(4, 6), nn.Linear(6, 2)
        self.hidden = None

    def forward(self, x):
        self.hidden = torch.tanh(self.encoder(x))
        self.attention = torch.softmax(self.hidden, dim=-1).detach()
        linger_in_replica_0()
        return self.head(self.hidden)


@case
def hidden_read_by_the_loss():
    def loss_of(model, x):
        return model(x).pow(2).mean() + 0.1 * model.hidden.pow(2).mean()

    with strategy.scope():
        torch.manual_seed(0)
        model = KeepsHidden()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(0)
    reference = KeepsHidden()
    train(model, optimizer, loss_of, True)
    train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), loss_of, False)
    with torch.no_grad():
        strategy.run(model, args=(halves(BATCHES[0]),))
        expected = torch.softmax(torch.tanh(reference.encoder(BATCHES[0][:4])), -1)
    outside = model.attention   # outside the run: replica 0's, as rank 0's script reads its own
    model.hidden = None          # a write outside the run reaches every replica
    seen = strategy.experimental_local_results(strategy.run(lambda: model.hidden is None))
    return {"diff": max_diff(model, reference), "outside_shape": tuple(outside.shape),
            "outside_is_replica_0s": bool(torch.allclose(outside, expected, atol=1e-6)),
            "reset_seen": all(seen), "in_dict": "hidden" in vars(model)}


class StatefulRNN(nn.Module):
    """Carries its hidden state from batch to batch on itself, detached (truncated backpropagation)."""

    def __init__(self):
        super().__init__()
        self.cell, self.out = nn.GRUCell(4, 5), nn.Linear(5, 1)
        self.state = None

    def forward(self, x):
        state = self.cell(x, self.state)
        linger_in_replica_0()
        self.state = state.detach()
        return self.out(state)


@case
def state_carried_per_replica():
    """Each replica continues its own state, as each DDP rank does; a reset outside the run reaches all."""
    def build():
        torch.manual_seed(0)
        return StatefulRNN()

    def loss_of(model, x):
        return model(x).pow(2).mean()

    with strategy.scope():
        model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ranks = [build(), build()]   # DDP by hand: each rank its module and half, the gradients averaged
    optimizers = [torch.optim.SGD(r.parameters(), lr=0.1) for r in ranks]

    def ddp_step(x):
        for rank, opt in zip(ranks, optimizers):
            opt.zero_grad()
        for i, rank in enumerate(ranks):
            loss_of(rank, x[4 * i:4 * i + 4]).backward()
        for params in zip(*(r.parameters() for r in ranks)):
            mean = (params[0].grad + params[1].grad) / 2
            for p in params:
                p.grad = mean.clone()
        for opt in optimizers:
            opt.step()

    diffs = []
    for epoch in range(2):
        model.state = None
        for rank in ranks:
            rank.state = None
        for x in BATCHES:
            strategy.run(lambda a: (optimizer.zero_grad(), loss_of(model, a).backward(), optimizer.step()),
                         args=(halves(x),))
            ddp_step(x)
        diffs.append(max_diff(model, ranks[0]))
    states = strategy.experimental_local_results(strategy.run(lambda: model.state))
    return {"diffs": diffs, "state_diff": max((a - r.state).abs().max().item() for a, r in zip(states, ranks))}


@case
def deleted_per_replica():
    with strategy.scope():
        torch.manual_seed(0)
        model = KeepsHidden()

    def forget(x):
        model(x)
        kept = hasattr(model, "attention")
        if md.distribute.get_replica_context().replica_id_in_sync_group == 1:
            del model.attention
        return kept, hasattr(model, "attention")

    seen = strategy.experimental_local_results(strategy.run(forget, args=(halves(BATCHES[0]),)))
    outside = hasattr(model, "attention")   # replica 0 kept its own
    del model.attention
    return {"seen": [list(s) for s in seen], "outside": outside, "after_del": hasattr(model, "attention")}


class Annealed(nn.Module):
    """A softmax temperature annealed at every forward, and a call counter (Python numbers)."""

    def __init__(self):
        super().__init__()
        self.linear, self.tau, self.calls = nn.Linear(4, 3), 2.0, 0

    def forward(self, x):
        self.calls += 1
        tau = self.tau
        linger_in_replica_0()
        self.tau = max(0.5, tau * 0.7)
        return torch.softmax(self.linear(x) / tau, dim=-1)


@case
def numbers_advance_once_per_replica():
    def build():
        torch.manual_seed(0)
        return Annealed()

    def loss_of(model, x):
        return model(x).pow(2).mean()

    with strategy.scope():
        model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    reference = build()
    train(model, optimizer, loss_of, True)
    train(reference, torch.optim.SGD(reference.parameters(), lr=0.5), loss_of, False)
    inside = strategy.experimental_local_results(strategy.run(lambda: torch.tensor([model.calls, model.tau])))
    return {"diff": max_diff(model, reference), "calls": model.calls, "tau": model.tau,
            "inside": [t.tolist() for t in inside], "reference": [reference.calls, reference.tau]}


class ModeScale(nn.Module):
    """Differs between training and evaluation, as dropout and BatchNorm do, but deterministically."""

    def forward(self, x):
        return x * (2.0 if self.training else 1.0)


@case
def mode_switched_inside_the_step():
    """TRADES-style adversarial training: ``model.eval()`` to craft the example, ``model.train()`` after."""
    def build():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 8), ModeScale(), nn.Tanh(), nn.Linear(8, 2))

    def loss_of(model, x):
        model.eval()
        ctx = md.distribute.get_replica_context()
        if ctx is not None and ctx.replica_id_in_sync_group == 1:
            time.sleep(0.02)   # replica 1 crafts while replica 0 is back in training
        x_adv = (x + 0.01).requires_grad_(True)
        gradient, = torch.autograd.grad(model(x_adv).pow(2).sum(), [x_adv])
        x_adv = (x_adv + 0.1 * gradient.sign()).detach()
        model.train()
        return model(x).pow(2).mean() + model(x_adv).pow(2).mean()

    with strategy.scope():
        model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = build()
    train(model, optimizer, loss_of, True)
    train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), loss_of, False)
    after = model.training
    saved = io.BytesIO()
    torch.save(model, saved)   # between runs a plain module: each flag in its __dict__
    saved.seek(0)
    loaded = torch.load(saved, weights_only=False)
    after = after and all("training" in vars(m) and m.training for m in loaded.modules())
    model.eval()   # outside the run: every replica's mode
    seen = strategy.experimental_local_results(strategy.run(lambda: [m.training for m in model.modules()]))
    return {"diff": max_diff(model, reference), "after": after, "eval_everywhere": not any(any(s) for s in seen)}


@case
def plain_module_between_runs():
    """Between runs each name holds replica 0's value in ``__dict__`` (deepcopy, torch.save and vars()
    see a plain module); the hooks go when no strategy lives."""
    global strategy

    class Doubler(nn.Module):
        def forward(self, x):
            self.last = x * 2
            return self.last

    doubler = Doubler()
    strategy.run(doubler, args=(halves(BATCHES[0]),))
    inside = strategy.experimental_local_results(strategy.run(lambda: "last" in vars(doubler)))
    between = sorted(vars(doubler)) == sorted(vars(copy.deepcopy(doubler)))
    plain = not any("multidev" in k for k in vars(doubler)) and torch.equal(doubler.last, BATCHES[0][:4] * 2)
    strategy = None
    gc.collect()
    gc.collect()
    getattr_is_torchs = nn.Module.__getattr__.__module__ == "torch.nn.modules.module"
    return {"inside": [bool(i) for i in inside], "between": between and plain, "getattr_is_torchs": getattr_is_torchs,
            "kept": bool(torch.equal(vars(doubler).get("last", torch.zeros(1)), BATCHES[0][:4] * 2))}


print(json.dumps(RESULTS))
