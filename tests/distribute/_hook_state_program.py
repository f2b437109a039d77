"""Run by test_hook_state.py in a fresh interpreter (2 logical CPUs): hooks and forwards that keep tensors in
Python containers, with the replicas made to overlap on purpose (they meet in an all-reduce, or replica 0
lingers, between the write and the read), against one device on the whole batch (mean losses over equal
halves). Prints one JSON object: case -> result (``error`` or the differences)."""

from __future__ import annotations

import json
import time

import torch
from torch import nn
from torch.nn import functional as F

import multidev as md

torch.set_default_dtype(torch.float64)
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
g = torch.Generator().manual_seed(1)
X, Y = torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)
RESULTS: dict = {}


def meet():
    """Both replicas have written before either reads on."""
    md.distribute.get_replica_context().all_reduce("sum", torch.ones(()))


def rid() -> int:
    return int(md.distribute.get_replica_context().replica_id_in_sync_group)


def halves(x):
    return strategy.experimental_distribute_values_from_function(lambda ctx: x[4 * ctx.replica_id_in_sync_group:][:4])


def net(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))


def case(fn):
    try:
        RESULTS[fn.__name__] = fn()
    except Exception as e:   # noqa: BLE001 - recorded, checked by the test
        RESULTS[fn.__name__] = {"error": f"{type(e).__name__}: {e}"}
    return fn


def _hint(keyed: bool) -> dict:
    """A teacher's features under no_grad, stored by a hook, matched by the student's output: one SGD step."""
    features = {}
    teacher_cpu, student_cpu = net(2), net(3)
    with strategy.scope():
        teacher, student = net(2), net(3)
        opt = torch.optim.SGD(student.parameters(), lr=0.5)
    hook = (lambda m, i, o: features.__setitem__((rid(), "t"), o)) if keyed else \
        (lambda m, i, o: features.__setitem__("t", o))
    teacher[1].register_forward_hook(hook)

    def step(x):
        with torch.no_grad():
            teacher(x)
        meet()
        t = features[rid(), "t"] if keyed else features["t"]
        loss = F.mse_loss(student(x)[:, :2], t[:, :2])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    strategy.run(step, args=(halves(X),))
    ref_opt = torch.optim.SGD(student_cpu.parameters(), lr=0.5)
    with torch.no_grad():
        t = teacher_cpu[1](teacher_cpu[0](X))
    F.mse_loss(student_cpu(X)[:, :2], t[:, :2]).backward()
    ref_opt.step()
    diff = max(float((a - b).abs().max()) for a, b in zip(student.parameters(), student_cpu.parameters()))
    return {"diff": diff}


@case
def teacher_features_in_a_shared_dict():
    return _hint(keyed=False)


@case
def teacher_features_keyed_by_replica():
    return _hint(keyed=True)


@case
def gradcam_gradients_in_a_shared_dict():
    gradients = {}
    model_cpu = net(4)
    with strategy.scope():
        model = net(4)
    model[1].register_full_backward_hook(lambda m, gi, go: gradients.__setitem__("h", go[0]))

    def step(x):
        model(x).pow(2).sum().backward()
        meet()
        return gradients["h"].sum()

    got = strategy.experimental_local_results(strategy.run(step, args=(halves(X),)))
    want = []
    for half in (X[:4], X[4:]):
        h = model_cpu[1](model_cpu[0](half)).detach().requires_grad_()
        model_cpu[2](h).pow(2).sum().backward()
        want.append(float(h.grad.sum()))
    return {"diff": max(abs(float(a) - b) for a, b in zip(got, want))}


@case
def gradcam_outside_runs_is_not_refused():
    """Grad-CAM at inference, outside ``strategy.run``: one caller, one dict (nothing to refuse)."""
    activations = {}
    with strategy.scope():
        model = net(5)
    model[1].register_forward_hook(lambda m, i, o: activations.__setitem__("h", o.detach()))
    model(X)
    return {"shape": list(activations["h"].shape)}


class FeatureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        self.features = []
        if md.distribute.get_replica_context() is not None and rid() == 0:
            time.sleep(0.05)   # the other replica's forward writes its list meanwhile
        for block in self.blocks:
            x = torch.tanh(block(x))
            self.features.append(x)
        return x


@case
def features_list_made_in_forward():
    torch.manual_seed(6)
    model_cpu = FeatureNet()
    torch.manual_seed(6)
    with strategy.scope():
        model = FeatureNet()

    def step(x):
        model(x)
        return torch.stack([f.detach().sum() for f in model.features])

    got = strategy.experimental_local_results(strategy.run(step, args=(halves(X),)))
    want = []
    for half in (X[:4], X[4:]):
        model_cpu(half)
        want.append(torch.stack([f.detach().sum() for f in model_cpu.features]))
    return {"diff": max(float((a - b).abs().max()) for a, b in zip(got, want)),
            "lists": [len(model.features), type(model.features).__name__]}


@case
def tensor_hook_gradient_in_a_shared_dict():
    """Grad-CAM on an activation tensor: ``h.register_hook(lambda g: grads.__setitem__("h", g))`` in the step."""
    grads = {}
    with strategy.scope():
        model = net(7)

    def step(x):
        h = model[1](model[0](x))
        h.register_hook(lambda grad: grads.__setitem__("h", grad))
        model[2](h).pow(2).sum().backward()
        meet()
        return grads["h"].sum()

    return {"value": float(strategy.reduce("SUM", strategy.run(step, args=(halves(X),)), axis=None))}


@case
def tensor_hook_norm_log_keyed_by_replica():
    """The same log kept per replica (one list per replica id): not refused."""
    norms = {0: [], 1: []}
    with strategy.scope():
        model = net(8)

    def step(x):
        h = model[1](model[0](x))
        h.register_hook(lambda grad: norms[rid()].append(grad.norm()))
        model[2](h).pow(2).sum().backward()
        return norms[rid()][-1]

    strategy.run(step, args=(halves(X),))
    return {"lengths": [len(norms[0]), len(norms[1])]}


print(json.dumps(RESULTS))
