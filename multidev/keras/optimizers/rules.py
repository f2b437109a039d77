"""Keras 3's update rules as element-wise ``torch.optim`` optimizers, one foreach kernel sequence per step.

torch.optim's rules differ from Keras's (RMSprop's epsilon outside the square root, Adam's epsilon
after bias correction, NAdam's momentum schedule, SGD momentum without the learning rate): the
Keras optimizers in ``builtin.py`` step these classes instead. Each is element-wise per parameter
(so replicas on one CPU may split the update, ``distribute/replica_update``) and keeps its state per
parameter under Keras's slot names, plus ``step`` (this parameter's update count: Keras's
``iterations + 1`` when every variable gets a gradient each step). Keras's weight decay
(``variable -= variable * weight_decay * learning_rate`` before the update) is part of every rule.

Example:
    opt = RMSpropRule(model.parameters(), lr=0.1, rho=0.9, epsilon=1e-7)
    loss.backward(); opt.step()
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import torch

from multidev.distribute.replica_update import register_elementwise


class KerasRule(torch.optim.Optimizer):
    """Base: collects each group's parameters with gradients by (device, dtype), creates missing
    slots, applies weight decay, then calls ``_update`` with lists of tensors."""

    _slots: tuple = ()          # state names created as zeros like the parameter
    _counts_steps = False       # whether the rule reads its per-parameter step count

    def __init__(self, params, lr=0.001, weight_decay=0.0, **hyper):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay or 0.0, **hyper})

    def _slot_names(self, group: dict) -> tuple:
        return self._slots

    def _init_slot(self, name: str, param: torch.Tensor, group: dict) -> torch.Tensor:
        return torch.zeros_like(param, memory_format=torch.preserve_format)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.apply_update()
        return loss

    @torch.no_grad()
    def apply_update(self) -> None:
        """The update of ``step()`` without torch's step hooks: what a Keras optimizer calls (its
        replica's own rule, ``replica_rules``, needs nothing from the global hooks)."""
        for group in self.param_groups:
            for params, grads, states in self._batches(group):
                if group["weight_decay"]:
                    torch._foreach_mul_(params, 1.0 - group["lr"] * group["weight_decay"])
                self._update(group, params, grads, states)

    def _batches(self, group: dict) -> list:
        """``(params, grads, states)`` of the parameters with a gradient, one batch per device and dtype."""
        names = self._slot_names(group)
        batches: dict = defaultdict(lambda: ([], [], []))
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if grad.is_sparse:
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients; densify them first.")
            state = self.state[p]
            if any(name not in state for name in names) or (self._counts_steps and "step" not in state):
                self._init_state(state, p, group, names)   # first step, or state saved under other slot names
            params, grads, states = batches[(p.device, p.dtype)]
            params.append(p)
            grads.append(grad)
            states.append(state)
        return list(batches.values())

    def _init_state(self, state: dict, p: torch.Tensor, group: dict, names: tuple) -> None:
        for name in names:
            if name not in state:
                state[name] = self._init_slot(name, p, group)
        if self._counts_steps and "step" not in state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)

    @staticmethod
    def _next_steps(states: list) -> list:
        """Count this update in each parameter's ``step``; returns the new counts as floats."""
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1.0)
        return [s.item() for s in steps]

    def _update(self, group: dict, params: list, grads: list, states: list) -> None:
        raise NotImplementedError


def _slot(states: list, name: str) -> list:
    return [s[name] for s in states]


class SGDRule(KerasRule):
    """Keras SGD: ``m = momentum * m - lr * g``; ``p += m`` (nesterov: ``p += momentum * m - lr * g``)."""

    def __init__(self, params, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, momentum=momentum, nesterov=nesterov)

    def _slot_names(self, group):
        return ("momentum",) if group["momentum"] != 0 else ()

    def _update(self, group, params, grads, states):
        lr, momentum = group["lr"], group["momentum"]
        if momentum == 0:
            torch._foreach_add_(params, grads, alpha=-lr)
            return
        m = _slot(states, "momentum")
        torch._foreach_mul_(m, momentum)
        torch._foreach_add_(m, grads, alpha=-lr)
        if group["nesterov"]:
            torch._foreach_add_(params, m, alpha=momentum)
            torch._foreach_add_(params, grads, alpha=-lr)
        else:
            torch._foreach_add_(params, m)


class AdamRule(KerasRule):
    """Keras Adam: ``p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)`` (v: its running
    maximum with amsgrad)."""

    _counts_steps = True

    def __init__(self, params, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, amsgrad=amsgrad)

    def _slot_names(self, group):
        return ("momentum", "velocity", "velocity_hat") if group["amsgrad"] else ("momentum", "velocity")

    def _update(self, group, params, grads, states):
        lr, beta_1, beta_2 = group["lr"], group["beta_1"], group["beta_2"]
        steps = self._next_steps(states)
        m, v = _slot(states, "momentum"), _slot(states, "velocity")
        torch._foreach_lerp_(m, grads, 1 - beta_1)
        torch._foreach_mul_(v, beta_2)                       # v + (g^2 - v)(1 - b2), with no temporary
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta_2)
        if group["amsgrad"]:
            v_hat = _slot(states, "velocity_hat")
            torch._foreach_maximum_(v_hat, v)
            v = v_hat
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, group["epsilon"])
        torch._foreach_addcdiv_(params, m, denom, [-_adam_alpha(lr, beta_1, beta_2, t, params[0].dtype) for t in steps])


def _adam_alpha(lr: float, beta_1: float, beta_2: float, t: float, dtype: torch.dtype) -> float:
    """Keras's ``lr * sqrt(1 - b2^t) / (1 - b1^t)``, computed as Keras does in the variable's dtype
    (float32: ``1 - 0.999^t`` there is 1.3e-5 off the exact value, which moves Adam's first steps by
    1e-4 of the learning rate; TensorFlow 2.21's numbers need the same rounding)."""
    f = np.float64 if dtype == torch.float64 else np.float32
    b1, b2 = f(beta_1) ** f(t), f(beta_2) ** f(t)
    return float(f(lr) * np.sqrt(f(1) - b2) / (f(1) - b1))


class NadamRule(KerasRule):
    """Keras Nadam: momentum schedule ``u_t = b1 * (1 - 0.5 * 0.96^t)`` with its running product,
    ``p -= lr * (u_{t+1} m / (1 - prod_{t+1}) + (1 - u_t) g / (1 - prod_t)) / (sqrt(v / (1 - b2^t)) + eps)``."""

    _counts_steps = True

    def __init__(self, params, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)

    def _slot_names(self, group):
        return ("momentum", "velocity", "u_product")

    def _init_slot(self, name, param, group):
        if name == "u_product":
            return torch.tensor(1.0, dtype=torch.float64)
        return super()._init_slot(name, param, group)

    def _update(self, group, params, grads, states):
        lr, beta_1, beta_2 = group["lr"], group["beta_1"], group["beta_2"]
        steps = self._next_steps(states)
        products = _slot(states, "u_product")
        u_now = [beta_1 * (1.0 - 0.5 * 0.96 ** t) for t in steps]
        u_next = [beta_1 * (1.0 - 0.5 * 0.96 ** (t + 1)) for t in steps]
        torch._foreach_mul_(products, u_now)
        prod_now = [p.item() for p in products]
        m, v = _slot(states, "momentum"), _slot(states, "velocity")
        torch._foreach_lerp_(m, grads, 1 - beta_1)
        torch._foreach_mul_(v, beta_2)                       # v + (g^2 - v)(1 - b2), with no temporary
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta_2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, [math.sqrt(1 - beta_2 ** t) for t in steps])
        torch._foreach_add_(denom, group["epsilon"])
        torch._foreach_addcdiv_(params, m, denom, [-lr * un / (1 - pn * un) for un, pn in zip(u_next, prod_now)])
        torch._foreach_addcdiv_(params, grads, denom, [-lr * (1 - u) / (1 - pn) for u, pn in zip(u_now, prod_now)])


class RMSpropRule(KerasRule):
    """Keras RMSprop: ``v = rho v + (1 - rho) g^2``; ``p -= lr g / sqrt(v + epsilon)`` (centered:
    ``sqrt(v - a^2 + epsilon)``, ``a`` the mean gradient; momentum accumulates the increments)."""

    def __init__(self, params, lr=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, rho=rho, momentum=momentum, epsilon=epsilon, centered=centered)

    def _slot_names(self, group):
        return (("velocity",) + (("momentum",) if group["momentum"] > 0 else ())
                + (("average_gradient",) if group["centered"] else ()))

    def _update(self, group, params, grads, states):
        lr, rho, eps = group["lr"], group["rho"], group["epsilon"]
        v = _slot(states, "velocity")
        torch._foreach_mul_(v, rho)
        torch._foreach_addcmul_(v, grads, grads, value=1 - rho)
        if group["centered"]:
            avg = _slot(states, "average_gradient")
            torch._foreach_mul_(avg, rho)
            torch._foreach_add_(avg, grads, alpha=1 - rho)
            denom = torch._foreach_addcmul(v, avg, avg, value=-1)
            torch._foreach_add_(denom, eps)
        else:
            denom = torch._foreach_add(v, eps)
        torch._foreach_sqrt_(denom)
        if group["momentum"] > 0:
            mom = _slot(states, "momentum")
            torch._foreach_mul_(mom, group["momentum"])
            torch._foreach_addcdiv_(mom, grads, denom, value=lr)
            torch._foreach_sub_(params, mom)
        else:
            torch._foreach_addcdiv_(params, grads, denom, value=-lr)


class AdagradRule(KerasRule):
    """Keras Adagrad: ``acc += g^2``; ``p -= lr g / sqrt(acc + epsilon)``."""

    def __init__(self, params, lr=0.001, initial_accumulator_value=0.1, epsilon=1e-7, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, initial_accumulator_value=initial_accumulator_value,
                         epsilon=epsilon)

    def _slot_names(self, group):
        return ("accumulator",)

    def _init_slot(self, name, param, group):
        return torch.full_like(param, group["initial_accumulator_value"], memory_format=torch.preserve_format)

    def _update(self, group, params, grads, states):
        acc = _slot(states, "accumulator")
        torch._foreach_addcmul_(acc, grads, grads)
        denom = torch._foreach_add(acc, group["epsilon"])
        torch._foreach_sqrt_(denom)
        torch._foreach_addcdiv_(params, grads, denom, value=-group["lr"])


for _rule in (SGDRule, AdamRule, NadamRule, RMSpropRule, AdagradRule):
    register_elementwise(_rule)
