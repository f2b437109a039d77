"""Programs built on ``torch.func`` and higher-order autograd, typed as their authors print them, with the
port's changes only (models and optimizers built in ``port.scope()``, the loop body in ``port.run``, the data
through ``port.distribute``; runners in ``torchfunc_run.py``), float64, small synthetic data:

* MAML on sinusoid regression (tasks from a seeded generator, a meta-batch of 4 tasks: 2 a replica / rank):
  the inner loop with ``functional_call(model, fast_weights, x)`` and ``torch.autograd.grad(loss,
  fast_weights.values(), create_graph=True)``, fast weights ``{n: p - a * g}``, the outer
  ``meta_loss.backward()``, Adam; first-order MAML (``create_graph=False``);
* per-sample gradients (the torch.func tutorial's ``vmap(grad(compute_loss), in_dims=(None, None, 0, 0))``
  over ``{k: v.detach() for k, v in model.named_parameters()}``), then DP-SGD by hand: each sample's
  gradient clipped, summed, Gaussian noise from a seeded ``torch.Generator``, divided by the batch,
  ``p.grad = ...``, ``optimizer.step()``. No backward runs, so DDP reduces nothing: the DDP port reduces the
  gradients by hand (``port.reduce_hand_set_gradients``: ``dist.all_reduce(p.grad)``, a sum, as multidev's
  step sums gradients set by hand); ``dp_sgd_opacus`` draws the noise on the first replica only and divides
  by the global batch, as Opacus' ``DistributedDPOptimizer`` does: one device's DP-SGD;
* model ensembling: ``stack_module_state(models)`` and ``vmap(functional_call)``, the stacked parameters
  as leaves of an optimizer (as printed: refused on replicas; DDP reduces them nowhere) and registered as
  ``nn.Parameter``s of an ensemble module (the port that trains as DDP);
* a gradient penalty by double backprop (``torch.autograd.grad(out.sum(), x, create_graph=True)``), a
  Jacobian regularizer with ``torch.func.jacrev``, a curvature penalty from
  ``torch.autograd.functional.hvp(..., create_graph=True)``; an HVP of the batch's loss subtracted from the
  reduced gradients before the step (as printed: each rank its own correction; ``*_reduced`` averages it);
* ``checkpoint_sequential`` over a ``Sequential`` with dropout, a ``torch.jit.script``-ed submodule, a
  custom ``torch.autograd.Function`` with ``ctx.save_for_backward``, ``ctx.mark_non_differentiable`` and
  ``once_differentiable``.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.func import functional_call, grad, jacrev, stack_module_state, vmap
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint_sequential
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _classification(seed, n=16, width=6, classes=3):
    g = _gen(seed)
    x = torch.randn(n, width, generator=g, dtype=F64)
    return TensorDataset(x, torch.randint(0, classes, (n,), generator=g))


def _mlp(width=6, hidden=8, classes=3):
    return nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, classes)).double()


# --- MAML: few-shot sinusoid regression ----------------------------------------------------------------------
def _sinusoid_tasks(seed, tasks=8, k=5):
    """Support and query sets of ``tasks`` sinusoids ``A sin(x - phase)``, A in [0.1, 5], phase in [0, pi]."""
    g = _gen(seed)
    amplitude = 0.1 + 4.9 * torch.rand(tasks, 1, 1, generator=g, dtype=F64)
    phase = math.pi * torch.rand(tasks, 1, 1, generator=g, dtype=F64)
    x_spt = 10 * torch.rand(tasks, k, 1, generator=g, dtype=F64) - 5
    x_qry = 10 * torch.rand(tasks, k, 1, generator=g, dtype=F64) - 5
    return TensorDataset(x_spt, amplitude * torch.sin(x_spt - phase), x_qry, amplitude * torch.sin(x_qry - phase))


def _maml(first_order: bool):
    def maml(port) -> dict:
        torch.manual_seed(5)
        tasks = DataLoader(_sinusoid_tasks(50), batch_size=4)   # the meta-batch: 4 tasks
        with port.scope():
            net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).double()
            meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        model = port.wrap(net)
        inner_lr, inner_steps = 0.01, 2

        def train_step(x_spt, y_spt, x_qry, y_qry):
            meta_opt.zero_grad()
            meta_loss = 0.0
            for i in range(x_spt.size(0)):
                fast_weights = dict(model.named_parameters())
                for _ in range(inner_steps):
                    loss = F.mse_loss(functional_call(model, fast_weights, (x_spt[i],)), y_spt[i])
                    grads = torch.autograd.grad(loss, fast_weights.values(), create_graph=not first_order)
                    fast_weights = {n: p - inner_lr * g for (n, p), g in zip(fast_weights.items(), grads)}
                meta_loss = meta_loss + F.mse_loss(functional_call(model, fast_weights, (x_qry[i],)), y_qry[i])
            meta_loss = meta_loss / x_spt.size(0)
            meta_loss.backward()
            meta_opt.step()
            return meta_loss.detach()

        log = []
        for epoch in range(2):
            log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(tasks)]
        return {**port.weights(model), "log": log}
    return maml


# --- per-sample gradients with torch.func, DP-SGD by hand -------------------------------------------------------
def _dp_sgd(opacus: bool):
    def dp_sgd(port) -> dict:
        torch.manual_seed(6)
        loader = DataLoader(_classification(60), batch_size=8)
        with port.scope():
            model = _mlp()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        noise_generator = torch.Generator().manual_seed(7)
        max_grad_norm, noise_multiplier = 1.0, 0.5

        def compute_loss(params, buffers, sample, target):
            batch = sample.unsqueeze(0)
            targets = target.unsqueeze(0)
            predictions = functional_call(model, (params, buffers), (batch,))
            return F.cross_entropy(predictions, targets)

        ft_compute_grad = grad(compute_loss)
        ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))

        def train_step(data, targets):
            params = {k: v.detach() for k, v in model.named_parameters()}
            buffers = {k: v.detach() for k, v in model.named_buffers()}
            per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
            norms = torch.stack([g.reshape(g.shape[0], -1).norm(dim=1) for g in per_sample_grads.values()]).norm(dim=0)
            factors = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
            batch_size = data.shape[0] * (port.num_replicas() if opacus else 1)
            for name, p in model.named_parameters():
                summed = torch.einsum("i,i...->...", factors, per_sample_grads[name])
                noise = torch.normal(0.0, noise_multiplier * max_grad_norm, size=p.shape, generator=noise_generator,
                                     dtype=F64)
                if opacus and port.replica_id() != 0:   # DistributedDPOptimizer: the noise on the first rank only
                    noise = torch.zeros_like(noise)
                p.grad = (summed + noise) / batch_size
            port.reduce_hand_set_gradients(model.parameters())
            optimizer.step()
            return norms.mean()

        log = [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
        return {**port.weights(model), "log": log}
    return dp_sgd


# --- model ensembling: stack_module_state + vmap(functional_call) ---------------------------------------------
def ensemble_as_printed(port) -> dict:
    """The stacked parameters are new leaf tensors (``stack_module_state`` detaches the stack): an optimizer
    over them trains tensors that belong to no module."""
    torch.manual_seed(8)
    loader = DataLoader(_classification(61), batch_size=8)
    with port.scope():
        models = [_mlp() for _ in range(3)]
        params, buffers = stack_module_state(models)
        optimizer = torch.optim.SGD(params.values(), lr=0.1)
    base_model = copy.deepcopy(models[0]).to("meta")

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))

    def train_step(x, y):
        optimizer.zero_grad()
        predictions = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
        loss = F.cross_entropy(predictions.reshape(-1, 3), y.repeat(len(models)))
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
    flat = torch.cat([p.detach().reshape(-1) for p in params.values()])
    return {"params": flat.tolist(), "spread": port.spread(flat), "log": log}


class Ensemble(nn.Module):
    """The ensemble's stacked parameters registered on a module (DDP reduces a module's parameters)."""

    def __init__(self, models):
        super().__init__()
        params, _ = stack_module_state(models)
        self.names = list(params)
        self.stacked = nn.ParameterList(nn.Parameter(params[n]) for n in self.names)
        self.base = [copy.deepcopy(models[0]).to("meta")]   # a list: the skeleton is no submodule

    def forward(self, x):
        def fmodel(params, x):
            return functional_call(self.base[0], params, (x,))
        return vmap(fmodel, in_dims=(0, None))(dict(zip(self.names, self.stacked)), x)


def ensemble_module(port) -> dict:
    torch.manual_seed(8)
    loader = DataLoader(_classification(61), batch_size=8)
    with port.scope():
        ensemble = Ensemble([_mlp() for _ in range(3)])
        optimizer = torch.optim.SGD(ensemble.parameters(), lr=0.1)
    model = port.wrap(ensemble)

    def train_step(x, y):
        optimizer.zero_grad()
        predictions = model(x)
        loss = F.cross_entropy(predictions.reshape(-1, 3), y.repeat(predictions.shape[0]))
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
    return {**port.weights(model), "log": log}


# --- regularizers by higher-order autograd --------------------------------------------------------------------
def _regularized(penalty_of, seed):
    def program(port) -> dict:
        torch.manual_seed(seed)
        loader = DataLoader(_classification(seed + 100), batch_size=8)
        with port.scope():
            net = _mlp()
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
        model = port.wrap(net)
        probe = torch.Generator().manual_seed(seed + 1)

        def train_step(x, y):
            optimizer.zero_grad()
            loss, penalty = penalty_of(model, net, x, y, probe)
            total = loss + 0.1 * penalty
            total.backward()
            optimizer.step()
            return total.detach()

        log = []
        for epoch in range(2):
            log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
        return {**port.weights(model), "log": log}
    return program


def _input_gradient_penalty(model, net, x, y, probe):
    """Double backprop (Drucker & LeCun): the norm of the output's gradient with respect to the input."""
    x = x.clone().requires_grad_(True)
    out = model(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    return F.cross_entropy(out, y), grad_x.pow(2).sum(1).mean()


def _jacobian_penalty(model, net, x, y, probe):
    """The Frobenius norm of each sample's input-output Jacobian (``vmap(jacrev(f))``)."""
    jac = vmap(jacrev(lambda xi: net(xi.unsqueeze(0)).squeeze(0)))(x)
    return F.cross_entropy(model(x), y), jac.pow(2).sum((1, 2)).mean()


def _curvature_penalty(model, net, x, y, probe):   # (the loss through ``model``: DDP's forward)
    """Hutchinson's estimate of the loss's curvature ``v . H v`` along a random ``v`` (a seeded generator's
    draw), by ``torch.autograd.functional.hvp`` with ``create_graph=True``: the penalty trains the weights."""
    names = [n for n, _ in net.named_parameters()]
    params = tuple(p for _, p in net.named_parameters())

    def loss_of(*weights):
        return F.cross_entropy(functional_call(net, dict(zip(names, weights)), (x,)), y)

    v = tuple(torch.randn(p.shape, generator=probe, dtype=F64) for p in params)
    _, hv = torch.autograd.functional.hvp(loss_of, params, v, create_graph=True)
    return F.cross_entropy(model(x), y), sum((a * b).sum() for a, b in zip(v, hv))


def _hvp_in_update(reduce_correction: bool):
    """A curvature-corrected step: after ``backward``, each gradient minus ``rho`` times the Hessian-vector
    product of the batch's loss along it (``torch.autograd.functional.hvp``). The product is the replica's
    (rank's) own batch's: as printed the ranks apply different corrections; ``*_reduced`` averages it first."""
    def program(port) -> dict:
        torch.manual_seed(16)
        loader = DataLoader(_classification(116), batch_size=8)
        with port.scope():
            net = _mlp()
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        model = port.wrap(net)
        names = [n for n, _ in net.named_parameters()]

        def train_step(x, y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            params = tuple(net.parameters())

            def loss_of(*weights):
                return F.cross_entropy(functional_call(net, dict(zip(names, weights)), (x,)), y)

            _, hv = torch.autograd.functional.hvp(loss_of, tuple(p.detach() for p in params),
                                                  tuple(p.grad.clone() for p in params))
            with torch.no_grad():
                for p, h in zip(params, hv):
                    p.grad.sub_(0.5 * (port.mean_tensor(h) if reduce_correction else h))
            optimizer.step()
            return loss.detach()

        log = [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
        return {**port.weights(model), "log": log}
    return program


# --- checkpoint_sequential, a scripted submodule, a custom autograd.Function ----------------------------------
class CheckpointedSequential(nn.Module):
    """A ``Sequential`` with dropout run through ``checkpoint_sequential`` in two segments (its
    recomputation replays each replica's dropout masks, as each rank's)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 16), nn.ReLU(),
                                    nn.Dropout(0.2), nn.Linear(16, 3))

    def forward(self, x):
        return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)


class ScriptedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.tanh(self.linear(x))


class ScriptedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 8)
        self.block = torch.jit.script(ScriptedBlock())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.block(F.relu(self.stem(x))))


class TopGate(torch.autograd.Function):
    """``x @ w`` and the index of each row's largest output (not differentiable), backward once only."""

    @staticmethod
    def forward(ctx, x, w):
        out = x @ w
        index = out.argmax(1)
        ctx.save_for_backward(x, w)
        ctx.mark_non_differentiable(index)
        return out, index

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, grad_index):
        x, w = ctx.saved_tensors
        return grad_out @ w.t(), x.t() @ grad_out


class GatedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4, dtype=F64) * 0.5)
        self.head = nn.Linear(4, 3).double()

    def forward(self, x):
        h, index = TopGate.apply(x, self.w)
        return self.head(torch.tanh(h) + F.one_hot(index, 4).to(h.dtype))


def _plain(build, seed):
    def program(port) -> dict:
        torch.manual_seed(seed)
        loader = DataLoader(_classification(seed + 100), batch_size=8)
        with port.scope():
            net = build()
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        model = port.wrap(net)

        def train_step(x, y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.detach()

        log = []
        for epoch in range(2):
            log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
        return {**port.weights(model), "log": log}
    return program


PROGRAMS = {
    "maml": _maml(first_order=False), "maml_first_order": _maml(first_order=True),
    "dp_sgd": _dp_sgd(opacus=False), "dp_sgd_opacus": _dp_sgd(opacus=True),
    "ensemble_as_printed": ensemble_as_printed, "ensemble_module": ensemble_module,
    "input_gradient_penalty": _regularized(_input_gradient_penalty, 11),
    "jacobian_penalty": _regularized(_jacobian_penalty, 12),
    "hvp_curvature_penalty": _regularized(_curvature_penalty, 13),
    "hvp_in_update": _hvp_in_update(reduce_correction=False), "hvp_in_update_reduced": _hvp_in_update(True),
    "checkpoint_sequential_dropout": _plain(lambda: CheckpointedSequential().double(), 9),
    "jit_script_submodule": _plain(lambda: ScriptedNet().double(), 14),
    "custom_autograd_function": _plain(GatedNet, 15),
}
