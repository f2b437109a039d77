"""pytorch.org/tutorials' "Learning PyTorch" tutorials as printed, with the port's changes only
(``pytutorials.py`` says which; runners in ``pytutorials_run.py``), float64:

* "Learning PyTorch with Examples": the ``LegendrePolynomial3`` autograd Function with the manual update
  (a, b, c, d as parameters of a module built in the scope), the ``nn.Sequential`` polynomial with
  ``MSELoss(reduction='sum')``; "What is torch.nn really?"'s ``Mnist_Logistic`` with ``F.cross_entropy``
  and the manual update;
* ``legendre_free_tensors``, as printed (a, b, c, d free tensors updated by hand in the step): refused,
  its replicas would race on the tensors' one ``.grad``.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from pytutorials import F64, _gen


# --- Learning PyTorch with Examples; What is torch.nn really? ---------------------------------------------
class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


def _sine_loader():
    x = torch.linspace(-math.pi, math.pi, 64, dtype=F64)
    return DataLoader(TensorDataset(x, torch.sin(x)), batch_size=64)   # the whole set, each step


class Legendre(nn.Module):
    """The tutorial's a, b, c, d as the parameters of a module (the "Custom nn Modules" form)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Parameter(torch.full((), 0.0, dtype=F64)), nn.Parameter(torch.full((), -1.0, dtype=F64))
        self.c, self.d = nn.Parameter(torch.full((), 0.0, dtype=F64)), nn.Parameter(torch.full((), 0.3, dtype=F64))

    def forward(self, x):
        P3 = LegendrePolynomial3.apply   # To apply our Function, we use Function.apply method
        return self.a + self.b * P3(self.c + self.d * x)


def _manual_sgd_steps(port, model, loss_of, learning_rate, steps=6) -> list:
    """The tutorials' loop: forward, ``loss.backward()``, ``p -= learning_rate * p.grad`` under
    ``torch.no_grad()``, the gradients zeroed."""
    def step(x, y):
        loss = loss_of(model, x, y)
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
        model.zero_grad()
        return loss.detach()
    return [port.mean(port.run(step, args=batch)) for _ in range(steps) for batch in port.distribute(_sine_loader())]


def legendre_module(port) -> dict:
    with port.scope():
        net = Legendre()
    model = port.wrap(net)
    log = _manual_sgd_steps(port, model, lambda m, x, y: (m(x) - y).pow(2).sum(), 2e-3)
    return {**port.weights(model), "log": log}


def legendre_free_tensors(port) -> dict:
    """As printed: a, b, c, d are tensors of no module, updated by hand in the step."""
    with port.scope():
        a = torch.full((), 0.0, dtype=F64, requires_grad=True)
        b = torch.full((), -1.0, dtype=F64, requires_grad=True)
        c = torch.full((), 0.0, dtype=F64, requires_grad=True)
        d = torch.full((), 0.3, dtype=F64, requires_grad=True)
    learning_rate = 2e-3

    def step(x, y):
        nonlocal a, b, c, d   # module globals in the tutorial
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():   # Update weights using gradient descent
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad, b.grad, c.grad, d.grad = None, None, None, None
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for _ in range(6) for batch in port.distribute(_sine_loader())]
    return {"params": [float(a), float(b), float(c), float(d)], "spread": 0.0, "log": log}


def polynomial_sequential(port) -> dict:
    """"PyTorch: nn": ``nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))`` on ``x.unsqueeze(-1).pow(p)``."""
    torch.manual_seed(6)
    p = torch.tensor([1, 2, 3])
    with port.scope():
        net = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)).double()
    model = port.wrap(net)
    loss_fn = nn.MSELoss(reduction="sum")
    log = _manual_sgd_steps(port, model, lambda m, x, y: loss_fn(m(x.unsqueeze(-1).pow(p)), y), 1e-4)
    return {**port.weights(model), "log": log}


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(784, 10, dtype=F64) / math.sqrt(784))
        self.bias = nn.Parameter(torch.zeros(10, dtype=F64))

    def forward(self, xb):
        return xb @ self.weights + self.bias


def mnist_logistic(port) -> dict:
    torch.manual_seed(8)
    x = torch.rand(16, 784, generator=_gen(80), dtype=F64)
    train_dl = DataLoader(TensorDataset(x, torch.randint(0, 10, (16,), generator=_gen(81))), batch_size=8)
    with port.scope():
        net = Mnist_Logistic()
    model = port.wrap(net)
    loss_func, lr = F.cross_entropy, 0.5

    def step(xb, yb):
        loss = loss_func(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= p.grad * lr
            model.zero_grad()
        return loss.detach()

    log = [port.mean(port.run(step, args=b)) for _ in range(2) for b in port.distribute(train_dl)]
    return {**port.weights(model), "log": log}


TUTORIALS4 = {"legendre_module": legendre_module, "legendre_free_tensors": legendre_free_tensors,
              "polynomial_sequential": polynomial_sequential, "mnist_logistic": mnist_logistic}
