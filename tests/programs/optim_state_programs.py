"""Optimizer state and gradient plumbing as public DDP programs write them, ported with two lines (model and
optimizer built in ``strategy.scope()``, the step in ``strategy.run`` over ``experimental_distribute_dataset``):

* optimizer state written between epochs: a momentum reset (``for s in opt.state.values():
  s["momentum_buffer"].zero_()``) on a ``torch.optim.SGD`` subclass, on hand-written optimizers (lucidrains'
  Lion, a LARS as SimCLR/BYOL repositories print it) and Adam's moments halved in place; the state dropped
  (``opt.state = defaultdict(dict)``); a second phase with a new optimizer built outside the scope; the moments
  halved inside the step, before or after ``optimizer.step()`` (SGD, Lion, Adam: each rank halves its own once);
  a hand-written optimizer keeping its parameters and velocities in its own attributes (not ``self.state``), one
  counting its steps in ``self.t`` (read by the loop, reset between epochs);
* gradients by other routes: a penalty on the parameters' gradient norm (``torch.autograd.grad(loss, params,
  create_graph=True)``: under DDP each rank's penalty is its own gradient's), ``torch.autograd.backward([l1,
  l2])``, ``per_example.backward(weights)``, a manual update through ``parameters_to_vector`` /
  ``vector_to_parameters`` in the step and a shrink of the whole vector between steps;
* a model of ``nn.ParameterDict`` / ``nn.ParameterList``; ``clip_grad_norm_(norm_type=inf)``, ``get_total_norm``
  then ``clip_grads_with_norm_``; ``OneCycleLR`` on
  Adam (it cycles ``betas``) and ``CyclicLR`` on SGD (it cycles ``momentum``), stepped in the step.

Each is ``case(port) -> dict`` over ``optim_state_run``'s ports (a DDP rank, or a strategy's port). Float64,
synthetic seeded data, global batch 8, 4 steps. Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS = 8, 4


def _loader(seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS * GLOBAL_BATCH, 6, generator=g, dtype=F64)
    return DataLoader(TensorDataset(x, torch.randint(0, 3, (STEPS * GLOBAL_BATCH,), generator=g)),
                      batch_size=GLOBAL_BATCH)


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()


class SGDWithRestarts(optim.SGD):   # a subclass, as a repository's own optimizer file defines one
    pass


class Lion(optim.Optimizer):
    """lucidrains/lion-pytorch's update, as printed."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in filter(lambda p: p.grad is not None, group["params"]):
                grad, lr, wd, state = p.grad, group["lr"], group["weight_decay"], self.state[p]
                beta1, beta2 = group["betas"]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                p.data.mul_(1 - lr * wd)
                update = exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1).sign_()
                p.add_(update, alpha=-lr)
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


class LARS(optim.Optimizer):
    """The LARS of SimCLR / BYOL repositories: a trust ratio per weight matrix, momentum in ``state['mu']``."""

    def __init__(self, params, lr, momentum=0.9, eta=0.001, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, eta=eta, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad
                if dp is None:
                    continue
                if p.ndim > 1:
                    dp = dp.add(p, alpha=g["weight_decay"])
                    param_norm, update_norm = torch.norm(p), torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0., torch.where(update_norm > 0, g["eta"] * param_norm / update_norm,
                                                                 one), one)
                    dp = dp.mul(q)
                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)
                p.add_(mu, alpha=-g["lr"])


class BufferedMomentum(optim.Optimizer):
    """A hand-written optimizer keeping its state in its own attributes: its parameters in ``self.params``,
    velocities in a list (a tutorial's "write your own optimizer"), not in ``self.state``."""

    def __init__(self, params, lr, momentum=0.9):
        params = list(params)
        super().__init__(params, dict(lr=lr, momentum=momentum))
        self.params = params
        self.velocities = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, closure=None):
        group = self.param_groups[0]
        for p, v in zip(self.params, self.velocities):
            v.mul_(group["momentum"]).add_(p.grad)
            p.sub_(v, alpha=group["lr"])


def _train(port, make_opt, *, seed=0, loss_of=None, backward=None, after_update=None, after_step=None, sched=None,
           model_of=_net) -> dict:
    """The loop every case shares: ``optimizer.zero_grad()``, ``backward(loss_of(model, x, y), model)`` (default
    ``loss.backward()``), ``step()``, ``after_update(optimizer)`` and ``sched.step()`` in the step;
    ``after_step(optimizer, model, i)`` between steps (an epoch's end)."""
    torch.manual_seed(seed)
    with port.scope():
        net = model_of()
        optimizer = make_opt(net.parameters())
        scheduler = sched(optimizer) if sched else None
    model = port.wrap(net)
    loss_of = loss_of or (lambda model, x, y: F.cross_entropy(model(x), y))

    def step(x, y):
        optimizer.zero_grad()
        loss = loss_of(model, x, y)
        if backward is None:
            loss.backward()
        else:
            backward(loss, model)
        optimizer.step()
        if after_update is not None:
            after_update(optimizer)
        if scheduler is not None:
            scheduler.step()
        return loss.detach().mean()

    log = []
    for i, batch in enumerate(port.distribute(_loader(seed + 1))):
        log.append(port.mean(port.run(step, args=batch)))
        if after_step is not None:
            after_step(optimizer, net, i)
    return {**port.weights(model), "log": log}


def _every_state_tensor(optimizer, write) -> None:
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                write(value)


def _restart_at(epoch: int, write):
    def after_step(optimizer, model, i):
        if i == epoch:
            _every_state_tensor(optimizer, write)
    return after_step


def momentum_reset_sgd_subclass(port) -> dict:
    """Warm restarts by hand: the momentum buffers zeroed after the second epoch."""
    return _train(port, lambda ps: SGDWithRestarts(ps, lr=0.1, momentum=0.9),
                  after_step=_restart_at(1, lambda t: t.zero_()))


def momentum_reset_lion(port) -> dict:
    return _train(port, lambda ps: Lion(ps, lr=0.01, weight_decay=0.1), after_step=_restart_at(1, lambda t: t.zero_()))


def momentum_scaled_lars(port) -> dict:
    return _train(port, lambda ps: LARS(ps, lr=0.5), after_step=_restart_at(1, lambda t: t.mul_(0.5)))


def adam_moments_halved(port) -> dict:
    return _train(port, lambda ps: optim.Adam(ps, lr=0.05), after_step=_restart_at(1, lambda t: t.mul_(0.5)))


def _unwritten(case, make_opt):
    """``case`` without its write between epochs (the test's reference that the write changed the training)."""
    def program(port) -> dict:
        return _train(port, make_opt)
    program.__name__ = f"{case.__name__}_unwritten"
    return program


def _in_step(make_opt, where: str, write):
    """``write`` on every state tensor inside the step, ``before`` or ``after`` ``optimizer.step()``; under DDP
    each rank writes its own optimizer's state."""
    def before(loss, model):
        loss.backward()
        _every_state_tensor(optimizers[-1], write)

    optimizers: list = []

    def make(ps):
        optimizers.append(make_opt(ps))
        return optimizers[-1]

    if where == "before":
        return lambda port: _train(port, make, backward=before)
    return lambda port: _train(port, make, after_update=lambda optimizer: _every_state_tensor(optimizer, write))


class WarmupSGD(optim.SGD):
    """An SGD counting its steps in an attribute for a warm-up (``self.t += 1``), read by the loop."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self.t = 0

    def step(self, closure=None):
        self.t += 1
        for group in self.param_groups:
            group["lr"] = 0.2 * min(1.0, self.t / 3)
        return super().step(closure)


def attribute_counter(port) -> dict:
    """``optimizer.t`` read after each step, and set back to 0 after the second (a restart of the warm-up)."""
    counts = []

    def after_step(optimizer, model, i):
        counts.append(float(optimizer.t))
        if i == 1:
            optimizer.t = 0
    result = _train(port, lambda ps: WarmupSGD(ps, lr=0.0, momentum=0.9), after_step=after_step)
    return {**result, "log": result["log"] + counts}


def own_attribute_state(port) -> dict:
    """Its velocities, one list the replicas' twins shared, were updated once per replica."""
    return _train(port, lambda ps: BufferedMomentum(ps, lr=0.1))


def own_attribute_state_reset(port) -> dict:
    """Its velocities zeroed in place after the second epoch (a restart): before, only replica 0's reached zero
    where the replicas keep their own copies (the replicas drifted apart, silently)."""
    def after_step(optimizer, model, i):
        if i == 1:
            for v in optimizer.velocities:
                v.zero_()
    return _train(port, lambda ps: BufferedMomentum(ps, lr=0.1), after_step=after_step)


def state_dropped_lion(port) -> dict:
    """``optimizer.state = defaultdict(dict)``: the optimizer starts over (a new task, continual learning)."""
    def after_step(optimizer, model, i):
        if i == 1:
            optimizer.state = defaultdict(dict)
    return _train(port, lambda ps: Lion(ps, lr=0.01), after_step=after_step)


def second_phase_new_optimizer(port) -> dict:
    """Adam for two epochs, then SGD with momentum over the same parameters, both built outside the scope."""
    torch.manual_seed(0)
    with port.scope():
        net = _net()
    model = port.wrap(net)
    phases = [optim.Adam(net.parameters(), lr=0.05)]

    def step(x, y):
        phases[-1].zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        phases[-1].step()
        return loss.detach()

    log = []
    for i, batch in enumerate(port.distribute(_loader(1))):
        log.append(port.mean(port.run(step, args=batch)))
        if i == 1:
            phases.append(optim.SGD(net.parameters(), lr=0.1, momentum=0.9))
    return {**port.weights(model), "log": log}


def grad_norm_penalty(port) -> dict:
    """Gradient-norm regularisation: ``torch.autograd.grad(loss, params, create_graph=True)``, the squared norm
    added to the loss. DDP does not reduce ``autograd.grad``: each rank penalises its own half's gradient."""
    def loss_of(model, x, y):
        loss = F.cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss, [p for p in model.parameters()], create_graph=True)
        return loss + 0.1 * sum(g.pow(2).sum() for g in grads)
    return _train(port, lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), loss_of=loss_of)


def backward_list_of_losses(port) -> dict:
    """``torch.autograd.backward([ce, penalty])``: two roots, one backward."""
    torch.manual_seed(0)
    with port.scope():
        net = _net()
        optimizer = optim.SGD(net.parameters(), lr=0.1)
    model = port.wrap(net)

    def step(x, y):
        optimizer.zero_grad()
        out = model(x)
        ce, penalty = F.cross_entropy(out, y), 0.1 * out.pow(2).mean()
        torch.autograd.backward([ce, penalty])
        optimizer.step()
        return (ce + penalty).detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_loader(1))]
    return {**port.weights(model), "log": log}


def backward_per_example_weights(port) -> dict:
    """``per_example.backward(weights / n)``: a non-scalar backward with the mean's weights as its gradient."""
    def backward(per, model):
        weights = torch.linspace(0.5, 1.5, per.numel(), dtype=F64)
        per.backward(weights / per.numel())
    return _train(port, lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), backward=backward,
                  loss_of=lambda model, x, y: F.cross_entropy(model(x), y, reduction="none"))


def vector_update_in_step(port) -> dict:
    """A hand-written SGD through the flat vector (TRPO-style code): ``vector_to_parameters(flat - lr * g)``."""
    torch.manual_seed(0)
    with port.scope():
        net = _net()
    model = port.wrap(net)

    def step(x, y):
        net.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            flat = parameters_to_vector(net.parameters())
            grad = parameters_to_vector([p.grad for p in net.parameters()])
            vector_to_parameters(flat - 0.2 * grad, net.parameters())
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_loader(1))]
    return {**port.weights(model), "log": log}


def vector_shrunk_between_steps(port) -> dict:
    def after_step(optimizer, model, i):
        with torch.no_grad():
            vector_to_parameters(parameters_to_vector(model.parameters()) * 0.9, model.parameters())
    return _train(port, lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), after_step=after_step)


class DictNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.ParameterDict({"a": nn.Parameter(torch.randn(6, 8, dtype=F64) * 0.3),
                                   "b": nn.Parameter(torch.randn(8, 3, dtype=F64) * 0.3)})
        self.b = nn.ParameterList([nn.Parameter(torch.zeros(8, dtype=F64)), nn.Parameter(torch.zeros(3, dtype=F64))])

    def forward(self, x):
        return torch.tanh(x @ self.w["a"] + self.b[0]) @ self.w["b"] + self.b[1]


def parameter_dict_list(port) -> dict:
    return _train(port, lambda ps: optim.Adam(ps, lr=0.05), model_of=DictNet)


def clip_inf_norm(port) -> dict:
    """``clip_grad_norm_(model.parameters(), 0.05, norm_type=float('inf'))``: the largest entry bounded."""
    def backward(loss, model):
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05, norm_type=float("inf"))
    return _train(port, lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), backward=backward)


def clip_with_total_norm(port) -> dict:
    """torch 2.6's split clipping: ``get_total_norm`` of the gradients, then ``clip_grads_with_norm_``."""
    def backward(loss, model):
        loss.backward()
        total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None], 2.0)
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), 0.2, total)
    return _train(port, lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), backward=backward)


def one_cycle_adam(port) -> dict:
    return _train(port, lambda ps: optim.Adam(ps, lr=0.01),
                  sched=lambda o: optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=STEPS))


def cyclic_lr_momentum(port) -> dict:
    return _train(port, lambda ps: optim.SGD(ps, lr=0.01, momentum=0.9),
                  sched=lambda o: optim.lr_scheduler.CyclicLR(o, 0.01, 0.2, step_size_up=1, cycle_momentum=True))


OPTIM_STATE = {f.__name__: f for f in (
    momentum_reset_sgd_subclass, momentum_reset_lion, momentum_scaled_lars, adam_moments_halved, state_dropped_lion,
    second_phase_new_optimizer, own_attribute_state, own_attribute_state_reset, attribute_counter, grad_norm_penalty,
    backward_list_of_losses, backward_per_example_weights, vector_update_in_step, vector_shrunk_between_steps,
    parameter_dict_list, clip_inf_norm, clip_with_total_norm, one_cycle_adam, cyclic_lr_momentum)}
for _name, _make in (("sgd", lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)), ("lion", lambda ps: Lion(ps, lr=0.01)),
                     ("adam", lambda ps: optim.Adam(ps, lr=0.05))):
    for _where in ("before", "after"):   # moments halved in the step, before or after optimizer.step()
        OPTIM_STATE[f"in_step_{_where}_{_name}"] = _in_step(_make, _where, lambda t: t.mul_(0.5))
OPTIM_STATE.update((f.__name__, f) for f in (
    _unwritten(momentum_reset_lion, lambda ps: Lion(ps, lr=0.01, weight_decay=0.1)),
    _unwritten(own_attribute_state_reset, lambda ps: BufferedMomentum(ps, lr=0.1)),
    _unwritten(momentum_scaled_lars, lambda ps: LARS(ps, lr=0.5)),
    _unwritten(adam_moments_halved, lambda ps: optim.Adam(ps, lr=0.05)),
    _unwritten(state_dropped_lion, lambda ps: Lion(ps, lr=0.01))))
