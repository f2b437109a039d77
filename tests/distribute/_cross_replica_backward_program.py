"""Run by test_cross_replica_backward.py in a fresh interpreter (2 logical CPUs): ``loss.backward()`` outside
``strategy.run`` over a model built in the scope (an EWC Fisher pass, a gradient-norm probe between steps),
against the same program on one device (equal halves of each global batch, mean losses: DDP's result up to
float reassociation; each DDP rank runs the outside pass itself, on the same data). Prints one JSON object."""

from __future__ import annotations

import json

import torch
from torch import nn
from torch.nn import functional as F

import multidev as md

F64 = torch.float64
torch.set_default_dtype(F64)
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
g = torch.Generator().manual_seed(5)
X, Y = torch.randn(4, 8, 6, generator=g), torch.randint(0, 3, (4, 8), generator=g)
OLD_X, OLD_Y = torch.randn(3, 8, 6, generator=g), torch.randint(0, 3, (3, 8), generator=g)
RESULTS: dict = {}


def case(fn):
    try:
        RESULTS[fn.__name__] = fn()
    except Exception as e:   # noqa: BLE001 - recorded and checked by the test
        RESULTS[fn.__name__] = {"error": f"{type(e).__name__}: {e}"[:600]}
    return fn


def build(distributed: bool, opt=lambda m: torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9)):
    torch.manual_seed(6)
    if not distributed:
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        return model, opt(model)
    with strategy.scope():
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        return model, opt(model)


def loop(model, step, distributed: bool, between=None):
    if not distributed:
        batches = zip(X, Y)
    else:
        data = torch.utils.data.TensorDataset(X.reshape(-1, 6), Y.reshape(-1))
        batches = strategy.experimental_distribute_dataset(torch.utils.data.DataLoader(data, batch_size=8))
    for i, (x, y) in enumerate(batches):
        (strategy.run(step, args=(x, y)) if distributed else step(x, y))
        if between is not None:
            between(i)


def flat(model, distributed: bool) -> list:
    if not distributed:
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()
    local = strategy.experimental_local_results
    assert all(torch.equal(local(p)[0], local(p)[1]) for p in model.parameters()), "copies apart"
    return torch.cat([local(p)[0].detach().reshape(-1) for p in model.parameters()]).tolist()


def ewc(distributed: bool) -> list:
    """The EWC pass as printed: the Fisher from squared gradients, ``if p.grad is not None``, then the penalty."""
    model, opt = build(distributed)
    fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for x, y in zip(OLD_X, OLD_Y):
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        for n, p in model.named_parameters():
            if p.grad is not None:
                fisher[n] += p.grad.data ** 2 / len(OLD_X)
    star = {n: p.detach().clone() for n, p in model.named_parameters()}

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        for n, p in model.named_parameters():
            loss = loss + 50.0 * (fisher[n] * (p - star[n]) ** 2).sum()
        loss.backward()
        opt.step()

    loop(model, step, distributed)
    return flat(model, distributed) + [float(sum(f.sum() for f in fisher.values()))]


def probe(distributed: bool) -> list:
    """A gradient-norm probe between steps; the step zeroes with ``set_to_none=False`` after its update, so the
    probe's gradient (left in ``.grad``) adds to the next step's, as on one device and on each DDP rank."""
    model, opt = build(distributed)
    norms = []

    def step(x, y):
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    def between(i):
        F.cross_entropy(model(OLD_X[0]), OLD_Y[0]).backward()
        norms.append(float(torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))))

    loop(model, step, distributed, between)
    return flat(model, distributed) + norms


@case
def ewc_fisher_outside_the_run():
    return {"diff": max(abs(a - b) for a, b in zip(ewc(True), ewc(False))), "fisher": ewc(False)[-1]}


@case
def gradient_probe_between_steps():
    return {"diff": max(abs(a - b) for a, b in zip(probe(True), probe(False)))}


@case
def every_replica_sees_the_gradient_and_none_discards_it():
    model, _ = build(True)
    F.cross_entropy(model(X[0]), Y[0]).backward()
    expected = model[0].weight.grad.clone()
    inside = strategy.experimental_local_results(strategy.run(lambda: model[0].weight.grad.clone()))
    model[0].weight.grad = None
    F.cross_entropy(model(X[1]), Y[1]).backward()
    model[2].bias.grad = None   # set without reading first: the pending gradient is gone
    gone = strategy.experimental_local_results(strategy.run(lambda: torch.tensor(model[2].bias.grad is None)))
    return {"inside": [float((t - expected).abs().max()) for t in inside], "gone": [bool(t) for t in gone]}


print(json.dumps(RESULTS))
