"""Keras 3's documented update rules in float64 numpy, one step at a time (the tests' reference).

Each ``step_<name>(w, g, state, lr, t, **hyper)`` updates ``w`` (a float64 array) in place for the
``t``-th update (1-based, Keras's ``iterations + 1``); ``state`` is a dict the rule fills. Weight
decay (``w -= w * wd * lr``, before the rule) is applied by ``run``.
"""

import numpy as np


def step_sgd(w, g, s, lr, t, momentum=0.0, nesterov=False):
    if momentum == 0:
        w -= lr * g
        return
    m = s.setdefault("m", np.zeros_like(w))
    m[...] = momentum * m - lr * g
    w += momentum * m - lr * g if nesterov else m


def step_adam(w, g, s, lr, t, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False):
    m, v = s.setdefault("m", np.zeros_like(w)), s.setdefault("v", np.zeros_like(w))
    alpha = lr * np.sqrt(1 - beta_2 ** t) / (1 - beta_1 ** t)
    m += (g - m) * (1 - beta_1)
    v += (g * g - v) * (1 - beta_2)
    if amsgrad:
        v_hat = s.setdefault("v_hat", np.zeros_like(w))
        v_hat[...] = np.maximum(v_hat, v)
        v = v_hat
    w -= m * alpha / (np.sqrt(v) + epsilon)


def step_nadam(w, g, s, lr, t, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    m, v = s.setdefault("m", np.zeros_like(w)), s.setdefault("v", np.zeros_like(w))
    u_t = beta_1 * (1 - 0.5 * 0.96 ** t)
    u_next = beta_1 * (1 - 0.5 * 0.96 ** (t + 1))
    s["u_product"] = s.get("u_product", 1.0) * u_t
    m += (g - m) * (1 - beta_1)
    v += (g * g - v) * (1 - beta_2)
    m_hat = u_next * m / (1 - s["u_product"] * u_next) + (1 - u_t) * g / (1 - s["u_product"])
    v_hat = v / (1 - beta_2 ** t)
    w -= m_hat * lr / (np.sqrt(v_hat) + epsilon)


def step_rmsprop(w, g, s, lr, t, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False):
    v = s.setdefault("v", np.zeros_like(w))
    v[...] = rho * v + (1 - rho) * g * g
    if centered:
        a = s.setdefault("a", np.zeros_like(w))
        a[...] = rho * a + (1 - rho) * g
        increment = lr * g / np.sqrt(v - a * a + epsilon)
    else:
        increment = lr * g / np.sqrt(v + epsilon)
    if momentum > 0:
        mom = s.setdefault("mom", np.zeros_like(w))
        mom[...] = momentum * mom + increment
        w -= mom
    else:
        w -= increment


def step_adagrad(w, g, s, lr, t, initial_accumulator_value=0.1, epsilon=1e-7):
    acc = s.setdefault("acc", np.full_like(w, initial_accumulator_value))
    acc += g * g
    w -= lr * g / np.sqrt(acc + epsilon)


def step_adadelta(w, g, s, lr, t, rho=0.95, epsilon=1e-7):
    acc_g, acc_d = s.setdefault("acc_g", np.zeros_like(w)), s.setdefault("acc_d", np.zeros_like(w))
    acc_g[...] = rho * acc_g + (1 - rho) * g * g
    delta = -np.sqrt(acc_d + epsilon) * g / np.sqrt(acc_g + epsilon)
    acc_d[...] = rho * acc_d + (1 - rho) * delta * delta
    w += lr * delta


def step_adamax(w, g, s, lr, t, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    m, u = s.setdefault("m", np.zeros_like(w)), s.setdefault("u", np.zeros_like(w))
    m += (g - m) * (1 - beta_1)
    u[...] = np.maximum(beta_2 * u, np.abs(g))
    w -= lr * m / ((1 - beta_1 ** t) * (u + epsilon))


def step_ftrl(w, g, s, lr, t, learning_rate_power=-0.5, initial_accumulator_value=0.1, l1_regularization_strength=0.0,
              l2_regularization_strength=0.0, l2_shrinkage_regularization_strength=0.0, beta=0.0):
    acc = s.setdefault("acc", np.full_like(w, initial_accumulator_value))
    linear = s.setdefault("linear", np.zeros_like(w))
    l2 = l2_regularization_strength + beta / (2.0 * lr)
    grad_to_use = g + 2 * l2_shrinkage_regularization_strength * w
    new_acc = acc + g * g
    linear += grad_to_use - (new_acc ** -learning_rate_power - acc ** -learning_rate_power) / lr * w
    quadratic = new_acc ** -learning_rate_power / lr + 2 * l2
    l1 = l1_regularization_strength
    w[...] = (np.clip(linear, -l1, l1) - linear) / quadratic
    acc[...] = new_acc


def step_lion(w, g, s, lr, t, beta_1=0.9, beta_2=0.99):
    m = s.setdefault("m", np.zeros_like(w))
    w -= lr * np.sign(m * beta_1 + g * (1 - beta_1))
    m[...] = m * beta_2 + g * (1 - beta_2)


def step_lamb(w, g, s, lr, t, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    m, v = s.setdefault("m", np.zeros_like(w)), s.setdefault("v", np.zeros_like(w))
    m += (g - m) * (1 - beta_1)
    v += (g * g - v) * (1 - beta_2)
    update = (m / (1 - beta_1 ** t)) / (np.sqrt(v / (1 - beta_2 ** t)) + epsilon)
    w_norm, u_norm = np.sqrt(np.sum(w * w)), np.sqrt(np.sum(update * update))
    w -= (w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0) * lr * update


STEPS = {"SGD": step_sgd, "Adam": step_adam, "AdamW": step_adam, "Nadam": step_nadam, "RMSprop": step_rmsprop,
         "Adagrad": step_adagrad, "Adadelta": step_adadelta, "Adamax": step_adamax, "Ftrl": step_ftrl,
         "Lion": step_lion, "Lamb": step_lamb}


def run(name, weights, grads_per_step, lrs, weight_decay=None, **hyper):
    """Every variable's value after each step: ``[[w_0 after step 1, w_1 ...], ...]``."""
    weights = [np.array(w, dtype=np.float64) for w in weights]
    states = [{} for _ in weights]
    out = []
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        for w, g, s in zip(weights, grads, states):
            if weight_decay:
                w -= w * weight_decay * lr
            STEPS[name](w, np.asarray(g, dtype=np.float64), s, lr, t, **hyper)
        out.append([w.copy() for w in weights])
    return out
