"""Module hooks and Python state they fill, as public PyTorch programs write them, ported with two lines:

* forward hooks storing a layer's output for the loss of the same step: a module-level ``activation = {}``
  (the forum's ``get_activation(name)``) for an activity penalty, FitNets-style distillation with the teacher
  under ``no_grad`` (both networks' features in one dict), fastai's ``SaveFeatures`` object, a hook writing
  ``module.out``, a ``self.features = []`` list appended in ``forward``; each dict also keyed by replica
  (the port);
* Grad-CAM's ``register_full_backward_hook`` storing ``grad_output[0]`` beside the forward hook's
  activations, the map logged every step; a ``register_forward_pre_hook`` rewriting the input.

Each is ``case(port) -> dict`` over ``hook_run``'s ports (a DDP rank, or a strategy's port; ``port.replica_id()``
is the rank or ``replica_id_in_sync_group``). Float64, synthetic seeded data, global batch 8. Imports only
torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, DIM, CLASSES = 8, 4, 6, 3


def data(seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS * GLOBAL_BATCH, DIM, generator=g, dtype=F64)
    y = torch.randint(0, CLASSES, (STEPS * GLOBAL_BATCH,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


def mlp(seed: int, hidden: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(DIM, hidden), nn.Tanh(), nn.Linear(hidden, CLASSES)).double()


def train(port, model, optimizer, loss_fn, loader) -> dict:
    """The loop every case shares: ``loss_fn(x, y) -> loss`` (or ``(loss, logged)``), SGD step, mean logged."""
    def step(x, y):
        optimizer.zero_grad()
        out = loss_fn(x, y)
        loss, logged = out if isinstance(out, tuple) else (out, out)
        loss.backward()
        optimizer.step()
        return logged.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    return {**port.weights(model), "log": log}


# --- the forum's get_activation: a module-level dict filled by a forward hook --------------------------------
activation = {}


def get_activation(name):
    def hook(model, input, output):
        activation[name] = output
    return hook


def _activity_penalty(port, keyed: bool) -> dict:
    with port.scope():
        model = mlp(11)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    if keyed:   # the port: one slot per replica
        model[1].register_forward_hook(lambda m, i, o: activation.__setitem__((port.replica_id(), "tanh"), o))
    else:
        model[1].register_forward_hook(get_activation("tanh"))
    model = port.wrap(model)

    def loss_fn(x, y):
        out = model(x)
        hidden = activation[port.replica_id(), "tanh"] if keyed else activation["tanh"]
        return F.cross_entropy(out, y) + 0.1 * hidden.pow(2).mean()

    return train(port, model, optimizer, loss_fn, data(12))


def activation_dict_penalty(port) -> dict:
    return _activity_penalty(port, keyed=False)


def activation_dict_keyed_by_replica(port) -> dict:
    return _activity_penalty(port, keyed=True)


# --- FitNets-style hint loss: teacher and student features from hooks, the teacher under no_grad -------------
def _fitnets(port, keyed: bool) -> dict:
    features = {}

    def save(name):
        def hook(module, inputs, output):
            features[(port.replica_id(), name) if keyed else name] = output
        return hook

    with port.scope():
        teacher, student = mlp(21, hidden=8).eval(), mlp(22, hidden=8)
        for p in teacher.parameters():
            p.requires_grad_(False)
        optimizer = optim.SGD(student.parameters(), lr=0.2)
    teacher[1].register_forward_hook(save("teacher"))
    student[1].register_forward_hook(save("student"))
    student = port.wrap(student)

    def loss_fn(x, y):
        with torch.no_grad():
            teacher(x)
        logits = student(x)
        get = (lambda name: features[port.replica_id(), name]) if keyed else features.__getitem__
        return F.cross_entropy(logits, y) + F.mse_loss(get("student"), get("teacher"))

    return train(port, student, optimizer, loss_fn, data(23))


def fitnets_hint_dict(port) -> dict:
    return _fitnets(port, keyed=False)


def fitnets_hint_keyed_by_replica(port) -> dict:
    return _fitnets(port, keyed=True)


# --- fastai's SaveFeatures: a plain object whose bound method is the hook ------------------------------------
class SaveFeatures:
    features = None

    def __init__(self, m):
        self.hook = m.register_forward_hook(self.hook_fn)

    def hook_fn(self, module, input, output):
        self.features = output

    def remove(self):
        self.hook.remove()


def save_features_object(port) -> dict:
    with port.scope():
        model = mlp(31)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    sf = SaveFeatures(model[1])
    model = port.wrap(model)

    def loss_fn(x, y):
        out = model(x)
        return F.cross_entropy(out, y) + 0.1 * sf.features.abs().mean()

    result = train(port, model, optimizer, loss_fn, data(32))
    sf.remove()
    return result


# --- a hook writing the module's attribute; a list made in forward -------------------------------------------
def hook_module_attribute(port) -> dict:
    with port.scope():
        model = mlp(41)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    model[1].register_forward_hook(lambda m, i, o: setattr(m, "out", o))
    inner, model = model, port.wrap(model)

    def loss_fn(x, y):
        out = model(x)
        return F.cross_entropy(out, y) + 0.1 * inner[1].out.pow(2).mean()

    return train(port, model, optimizer, loss_fn, data(42))


class FeatureNet(nn.Module):
    """Keeps every block's output in ``self.features``, a list made fresh in each ``forward`` (deep supervision)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)])
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x):
        self.features = []
        for block in self.blocks:
            x = torch.tanh(block(x))
            self.features.append(x)
        return self.head(x)


def features_list_in_forward(port) -> dict:
    torch.manual_seed(51)
    with port.scope():
        model = FeatureNet().double()
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    inner, model = model, port.wrap(model)

    def loss_fn(x, y):
        out = model(x)
        return F.cross_entropy(out, y) + 0.1 * sum(f.pow(2).mean() for f in inner.features)

    return train(port, model, optimizer, loss_fn, data(52))


# --- Grad-CAM's hooks in a training step; a forward pre-hook rewriting the input -----------------------------
def _gradcam(port, keyed: bool) -> dict:
    activations, gradients = {}, {}

    def key():
        return (port.replica_id(), "fc1") if keyed else "fc1"

    def forward_hook(module, input, output):
        activations[key()] = output.detach()

    def backward_hook(module, grad_input, grad_output):
        gradients[key()] = grad_output[0].detach()

    with port.scope():
        model = mlp(61)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    model[1].register_forward_hook(forward_hook)
    model[1].register_full_backward_hook(backward_hook)
    model = port.wrap(model)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        weights = gradients[key()].mean(0, keepdim=True)
        cam = F.relu((weights * activations[key()]).sum(1))
        return loss.detach(), cam.sum()

    log = [[port.mean(v) for v in port.run(step, args=batch)] for batch in port.distribute(data(62))]
    return {**port.weights(model), "log": log}


def gradcam_dicts(port) -> dict:
    return _gradcam(port, keyed=False)


def gradcam_keyed_by_replica(port) -> dict:
    return _gradcam(port, keyed=True)


def forward_pre_hook_input(port) -> dict:
    with port.scope():
        model = mlp(71)
        optimizer = optim.SGD(model.parameters(), lr=0.2)
    model[0].register_forward_pre_hook(lambda module, args: (args[0] * 0.5 + 1.0,))
    model = port.wrap(model)
    return train(port, model, optimizer, lambda x, y: F.cross_entropy(model(x), y), data(72))


HOOKS = {f.__name__: f for f in (
    activation_dict_penalty, activation_dict_keyed_by_replica, fitnets_hint_dict, fitnets_hint_keyed_by_replica,
    save_features_object, hook_module_attribute, features_list_in_forward, gradcam_dicts, gradcam_keyed_by_replica,
    forward_pre_hook_input)}
