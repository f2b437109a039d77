"""Keras 3's Adadelta, Adamax, Ftrl, Lamb and Lion rules as foreach ``torch.optim`` optimizers.

Example:
    opt = LionRule(model.parameters(), lr=1e-4, beta_1=0.9, beta_2=0.99)
"""

from __future__ import annotations

import torch

from multidev.distribute.replica_update import register_elementwise
from multidev.keras.optimizers.rules import KerasRule, _slot, moment_, scalar_type


class AdadeltaRule(KerasRule):
    """Keras Adadelta: ``a = rho a + (1 - rho) g^2``; ``d = sqrt(D + eps) / sqrt(a + eps) * g``;
    ``D = rho D + (1 - rho) d^2``; ``p -= lr d``."""

    def __init__(self, params, lr=0.001, rho=0.95, epsilon=1e-7, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, rho=rho, epsilon=epsilon)

    def _slot_names(self, group):
        return ("accumulated_grad", "accumulated_delta_var")

    def _update(self, group, params, grads, states):
        rho, eps = group["rho"], group["epsilon"]
        acc_grad, acc_delta = _slot(states, "accumulated_grad"), _slot(states, "accumulated_delta_var")
        torch._foreach_mul_(acc_grad, rho)
        torch._foreach_addcmul_(acc_grad, grads, grads, value=1 - rho)
        delta = torch._foreach_add(acc_delta, eps)
        torch._foreach_sqrt_(delta)
        rms_grad = torch._foreach_add(acc_grad, eps)
        torch._foreach_sqrt_(rms_grad)
        torch._foreach_mul_(delta, grads)
        torch._foreach_div_(delta, rms_grad)
        torch._foreach_mul_(acc_delta, rho)
        torch._foreach_addcmul_(acc_delta, delta, delta, value=1 - rho)
        torch._foreach_add_(params, delta, alpha=-group["lr"])


class AdamaxRule(KerasRule):
    """Keras Adamax: ``m = lerp(m, g, 1 - b1)``; ``u = max(b2 u, |g|)``;
    ``p -= lr m / ((1 - b1^t) (u + epsilon))``."""

    _counts_steps = True

    def __init__(self, params, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)

    def _slot_names(self, group):
        return ("momentum", "norm")

    def _update(self, group, params, grads, states):
        f = scalar_type(params[0].dtype)
        steps = self._next_steps(states)
        m, u = _slot(states, "momentum"), _slot(states, "norm")
        moment_(m, grads, 1 - group["beta_1"])
        torch._foreach_mul_(u, group["beta_2"])
        torch._foreach_maximum_(u, torch._foreach_abs(grads))
        denom = torch._foreach_add(u, group["epsilon"])     # (1 - b1^t) (u + eps), TensorFlow's order
        torch._foreach_mul_(denom, [float(f(1) - f(group["beta_1"]) ** f(t)) for t in steps])
        update = torch._foreach_mul(m, group["lr"])
        torch._foreach_div_(update, denom)
        torch._foreach_sub_(params, update)


class FtrlRule(KerasRule):
    """Keras FTRL-proximal: accumulates ``g^2`` and a linear term; the parameter is the closed-form
    minimiser ``(clip(linear, -l1, l1) - linear) / (acc^-power / lr + 2 l2)``."""

    def __init__(self, params, lr=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, learning_rate_power=learning_rate_power,
                         initial_accumulator_value=initial_accumulator_value,
                         l1_regularization_strength=l1_regularization_strength,
                         l2_regularization_strength=l2_regularization_strength,
                         l2_shrinkage_regularization_strength=l2_shrinkage_regularization_strength, beta=beta)

    def _slot_names(self, group):
        return ("accumulator", "linear")

    def _init_slot(self, name, param, group):
        if name == "accumulator":
            return torch.full_like(param, group["initial_accumulator_value"], memory_format=torch.preserve_format)
        return super()._init_slot(name, param, group)

    def _update(self, group, params, grads, states):
        lr, power = group["lr"], -group["learning_rate_power"]      # TensorFlow's order throughout
        l1 = group["l1_regularization_strength"]
        f = scalar_type(params[0].dtype)
        l2 = float(f(group["l2_regularization_strength"]) + f(group["beta"]) / (f(2.0) * f(lr)))
        shrinkage = group["l2_shrinkage_regularization_strength"]
        acc, linear = _slot(states, "accumulator"), _slot(states, "linear")
        new_acc = torch._foreach_add(acc, torch._foreach_mul(grads, grads))
        new_pow = torch._foreach_pow(new_acc, power)
        change = torch._foreach_sub(new_pow, torch._foreach_pow(acc, power))
        torch._foreach_div_(change, lr)
        torch._foreach_mul_(change, params)
        step = torch._foreach_add(grads, torch._foreach_mul(params, 2 * shrinkage)) if shrinkage else list(grads)
        step = torch._foreach_sub(step, change)
        torch._foreach_add_(linear, step)
        quadratic = torch._foreach_div(new_pow, lr)
        torch._foreach_add_(quadratic, float(f(2) * f(l2)))
        value = torch._foreach_clamp_max(torch._foreach_clamp_min(linear, -l1), l1)
        torch._foreach_sub_(value, linear)
        torch._foreach_div_(value, quadratic)
        torch._foreach_copy_(params, value)
        torch._foreach_copy_(acc, new_acc)


class LionRule(KerasRule):
    """Keras Lion: ``p -= lr sign(b1 m + (1 - b1) g)``; then ``m = b2 m + (1 - b2) g``."""

    def __init__(self, params, lr=0.001, beta_1=0.9, beta_2=0.99, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, beta_1=beta_1, beta_2=beta_2)

    def _slot_names(self, group):
        return ("momentum",)

    def _update(self, group, params, grads, states):
        beta_1, beta_2 = group["beta_1"], group["beta_2"]
        m = _slot(states, "momentum")
        direction = torch._foreach_mul(m, beta_1)
        torch._foreach_add_(direction, grads, alpha=1 - beta_1)
        torch._foreach_sign_(direction)
        torch._foreach_add_(params, direction, alpha=-group["lr"])
        torch._foreach_mul_(m, beta_2)
        torch._foreach_add_(m, grads, alpha=1 - beta_2)


class LambRule(KerasRule):
    """Keras Lamb: Adam's bias-corrected ``u = m_hat / (sqrt(v_hat) + epsilon)``, scaled per variable by the
    trust ratio ``||p|| / ||u||`` (1 where either norm is 0): ``p -= ratio lr u``. Per variable (the norms are of
    whole variables), which a split update keeps whole: each variable's owner replica updates all of it."""

    _counts_steps = True

    def __init__(self, params, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, weight_decay=0.0):
        super().__init__(params, lr, weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)

    def _slot_names(self, group):
        return ("momentum", "velocity")

    def _update(self, group, params, grads, states):
        f = scalar_type(params[0].dtype)
        beta_1, beta_2 = group["beta_1"], group["beta_2"]
        steps = self._next_steps(states)
        m, v = _slot(states, "momentum"), _slot(states, "velocity")
        moment_(m, grads, 1 - beta_1)
        moment_(v, torch._foreach_mul(grads, grads), 1 - beta_2)
        for p, m_p, v_p, t in zip(params, m, v, steps):
            m_hat = m_p / float(f(1) - f(beta_1) ** f(t))
            update = m_hat / ((v_p / float(f(1) - f(beta_2) ** f(t))).sqrt() + group["epsilon"])
            w_norm, g_norm = p.square().sum().sqrt(), update.square().sum().sqrt()
            ratio = torch.where((w_norm > 0) & (g_norm > 0), w_norm / g_norm, torch.ones_like(w_norm))
            p.sub_(ratio * group["lr"] * update)


for _rule in (AdadeltaRule, AdamaxRule, FtrlRule, LambRule, LionRule):
    register_elementwise(_rule)
