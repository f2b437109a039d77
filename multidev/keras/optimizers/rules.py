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

from collections import defaultdict

import numpy as np
import torch

from multidev.distribute.replica_update import register_elementwise


class KerasRule(torch.optim.Optimizer):
    """Base: collects each group's parameters with gradients by (device, dtype), creates missing
    slots, applies weight decay, then calls ``_update`` with lists of tensors."""

    _slots: tuple = ()          # state names created as zeros like the parameter
    _counts_steps = False       # whether the rule reads its per-parameter step count
    no_decay: frozenset = frozenset()   # ids of parameters excluded from weight decay

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
                    decayed = [p for p in params if id(p) not in self.no_decay] if self.no_decay else params
                    if decayed:
                        decay_(decayed, group["lr"], group["weight_decay"])
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
            state["step"] = torch.tensor(0.0, dtype=torch.float32, device="cpu")   # read as a float each step

    @staticmethod
    def _next_steps(states: list) -> list:
        """Count this update in each parameter's ``step``; returns the new counts as floats."""
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1.0)
        return [s.item() for s in steps]

    def _update(self, group: dict, params: list, grads: list, states: list) -> None:
        raise NotImplementedError


def decay_(params: list, lr: float, weight_decay: float) -> None:
    """Keras's weight decay ``p -= p * wd * lr``, in TensorFlow's order (float32 rounding included)."""
    decay = torch._foreach_mul(params, weight_decay)
    torch._foreach_mul_(decay, lr)
    torch._foreach_sub_(params, decay)


def scalar_type(dtype: torch.dtype):
    """The numpy type Keras computes a rule's scalars in (the variable's dtype; float32 below it)."""
    return np.float64 if dtype == torch.float64 else np.float32


def moment_(m: list, values: list, rate: float) -> None:
    """``m += (values - m) * rate`` in TensorFlow's order (no fused kernel: the same rounding)."""
    step = torch._foreach_sub(values, m)
    torch._foreach_mul_(step, rate)
    torch._foreach_add_(m, step)


def _slot(states: list, name: str) -> list:
    return [s[name] for s in states]


class SGDRule(KerasRule):
    """Keras SGD: ``m = momentum * m - lr * g``; ``p += m`` (nesterov: ``p += momentum * m - lr * g``)."""

    def __init__(self, params, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, momentum=momentum, nesterov=nesterov)

    def _slot_names(self, group):
        return ("momentum",) if group["momentum"] != 0 else ()

    def _update(self, group, params, grads, states):
        """Torch's fused kernels (a multiply-add rounds once where TensorFlow rounds twice: a few ulps of the
        weight's scale after many steps, for a third of the memory passes of TensorFlow's order)."""
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
            return torch.tensor(1.0, dtype=torch.float64, device="cpu")   # read as a float each step
        return super()._init_slot(name, param, group)

    def _update(self, group, params, grads, states):
        """TensorFlow's order, its scalars in the variable's dtype (float32: a float64 schedule was
        2-4e-7 off TensorFlow 2.21 after a few steps)."""
        f = scalar_type(params[0].dtype)
        beta_1, beta_2, one, half = f(group["beta_1"]), f(group["beta_2"]), f(1), f(0.5)
        steps = self._next_steps(states)
        products = _slot(states, "u_product")
        m, v = _slot(states, "momentum"), _slot(states, "velocity")
        moment_(m, grads, float(one - beta_1))       # Keras's Nadam: 1 - beta in float32, unlike Adam's
        moment_(v, torch._foreach_mul(grads, grads), float(one - beta_2))
        decay = [one - half * f(0.96) ** f(t) for t in steps]      # per parameter: its own step count
        u_now = [beta_1 * d for d in decay]
        u_next = [beta_1 * (one - half * f(0.96) ** f(t + 1)) for t in steps]
        prods = [f(p.item()) * beta_1 * d for p, d in zip(products, decay)]
        torch._foreach_copy_(products, [torch.tensor(float(p), dtype=torch.float64, device="cpu") for p in prods])
        m_hat = torch._foreach_mul(m, [float(u) for u in u_next])
        torch._foreach_div_(m_hat, [float(one - p * u) for p, u in zip(prods, u_next)])
        g_part = torch._foreach_mul(grads, [float(one - u) for u in u_now])
        torch._foreach_div_(g_part, [float(one - p) for p in prods])
        torch._foreach_add_(m_hat, g_part)
        denom = torch._foreach_div(v, [float(one - beta_2 ** f(t)) for t in steps])
        torch._foreach_sqrt_(denom)
        torch._foreach_add_(denom, group["epsilon"])
        torch._foreach_mul_(m_hat, group["lr"])
        torch._foreach_div_(m_hat, denom)
        torch._foreach_sub_(params, m_hat)


class RMSpropRule(KerasRule):
    """Keras RMSprop: ``v = rho v + (1 - rho) g^2``; ``p -= lr g / sqrt(v + epsilon)`` (centered:
    ``sqrt(v - a^2 + epsilon)``, ``a`` the mean gradient; momentum accumulates the increments)."""

    def __init__(self, params, lr=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, rho=rho, momentum=momentum, epsilon=epsilon, centered=centered)

    def _slot_names(self, group):
        return (("velocity",) + (("momentum",) if group["momentum"] > 0 else ())
                + (("average_gradient",) if group["centered"] else ()))

    def _update(self, group, params, grads, states):
        lr, rho, eps = group["lr"], group["rho"], group["epsilon"]      # TensorFlow's order throughout
        v = _slot(states, "velocity")
        torch._foreach_mul_(v, rho)
        squares = torch._foreach_mul(grads, grads)
        torch._foreach_mul_(squares, 1 - rho)
        torch._foreach_add_(v, squares)
        if group["centered"]:
            avg = _slot(states, "average_gradient")
            torch._foreach_mul_(avg, rho)
            torch._foreach_add_(avg, torch._foreach_mul(grads, 1 - rho))
            denom = torch._foreach_sub(v, torch._foreach_mul(avg, avg))
            torch._foreach_add_(denom, eps)
        else:
            denom = torch._foreach_add(v, eps)
        torch._foreach_sqrt_(denom)
        increment = torch._foreach_mul(grads, lr)
        torch._foreach_div_(increment, denom)
        if group["momentum"] > 0:
            mom = _slot(states, "momentum")
            torch._foreach_mul_(mom, group["momentum"])
            torch._foreach_add_(mom, increment)
            torch._foreach_sub_(params, mom)
        else:
            torch._foreach_sub_(params, increment)


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
        torch._foreach_add_(acc, torch._foreach_mul(grads, grads))
        denom = torch._foreach_add(acc, group["epsilon"])
        torch._foreach_sqrt_(denom)
        increment = torch._foreach_mul(grads, group["lr"])      # TensorFlow's order, for its rounding
        torch._foreach_div_(increment, denom)
        torch._foreach_sub_(params, increment)


for _rule in (SGDRule, AdamRule, NadamRule, RMSpropRule, AdagradRule):
    register_elementwise(_rule)


def slot_names(rule_class: object, lr: float, kwargs: dict) -> frozenset | None:
    """The per-variable state a ``KerasRule`` class keeps (Adam: ``{'momentum', 'velocity', 'step'}``),
    found by initialising it for a probe tensor; None for a rule that is not a ``KerasRule``."""
    if not (isinstance(rule_class, type) and issubclass(rule_class, KerasRule)):
        return None
    probe = torch.zeros(1)
    rule = rule_class([probe], lr=lr, **kwargs)
    state: dict = {}
    rule._init_state(state, probe, rule.param_groups[0], rule._slot_names(rule.param_groups[0]))
    return frozenset(state)
