"""Keras optimizers with Keras argument names, defaults and update rules (``rules.py``).

Example:
    md.keras.optimizers.Nadam()                    # lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7
    md.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True)
"""

from __future__ import annotations

from multidev.keras.optimizers import rules
from multidev.keras.optimizers.base import Optimizer


class _Hyper(Optimizer):
    """An optimizer whose rule takes the hyperparameters named in ``_hyper`` (same names as Keras)."""

    _hyper: tuple = ()

    def _torch_kwargs(self):
        return {name: getattr(self, name) for name in self._hyper}

    def get_config(self):
        return {**super().get_config(), **self._torch_kwargs()}


class SGD(_Hyper):
    """Gradient descent with optional (Nesterov) momentum (lr 0.01); Keras's velocity includes the rate."""

    _torch_class = rules.SGDRule
    _hyper = ("momentum", "nesterov")

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD", **kwargs):
        if not 0 <= momentum <= 1:
            raise ValueError(f"`momentum` must be between [0, 1]. Received: momentum={momentum!r}")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.momentum, self.nesterov = momentum, nesterov


class Adam(_Hyper):
    """Adam (lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7, amsgrad False); epsilon is added
    to ``sqrt(v)`` before the bias correction scales the step, as Keras does."""

    _torch_class = rules.AdamRule
    _hyper = ("beta_1", "beta_2", "epsilon", "amsgrad")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False, name="Adam", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon, self.amsgrad = beta_1, beta_2, epsilon, amsgrad


class AdamW(Adam):
    """Adam with decoupled weight decay (weight_decay 0.004), Keras's ``p -= p * wd * lr`` before each step."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="AdamW", **kwargs):
        if weight_decay is None:
            raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad, name=name, weight_decay=weight_decay, **kwargs)


class Nadam(_Hyper):
    """Adam with Nesterov momentum and Keras's momentum schedule ``beta_1 * (1 - 0.5 * 0.96^t)``
    (lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7)."""

    _torch_class = rules.NadamRule
    _hyper = ("beta_1", "beta_2", "epsilon")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Nadam", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon


class RMSprop(_Hyper):
    """RMSprop (lr 0.001, rho 0.9, momentum 0, epsilon 1e-7, centered False); epsilon inside the square root."""

    _torch_class = rules.RMSpropRule
    _hyper = ("rho", "momentum", "epsilon", "centered")

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, name="RMSprop", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.rho, self.momentum, self.epsilon, self.centered = rho, momentum, epsilon, centered


class Adagrad(_Hyper):
    """Adagrad (lr 0.001, initial_accumulator_value 0.1, epsilon 1e-7)."""

    _torch_class = rules.AdagradRule
    _hyper = ("initial_accumulator_value", "epsilon")

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7, name="Adagrad", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.initial_accumulator_value, self.epsilon = initial_accumulator_value, epsilon
