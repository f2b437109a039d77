"""Keras's Adadelta, Adamax, Ftrl, Lamb and Lion, with Keras argument names, defaults and update rules.

Example:
    md.keras.optimizers.Lion(learning_rate=1e-4)
    md.keras.optimizers.Ftrl(0.05, l1_regularization_strength=0.01)
"""

from __future__ import annotations

from multidev.keras.optimizers import rules_extra
from multidev.keras.optimizers.builtin import _Hyper


def _non_negative(**values) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"`{name}` needs to be positive or zero. Received: {name}={value!r}")


class Adadelta(_Hyper):
    """Adadelta (lr 0.001, rho 0.95, epsilon 1e-7)."""

    _torch_class = rules_extra.AdadeltaRule
    _hyper = ("rho", "epsilon")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, name="Adadelta", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.rho, self.epsilon = rho, epsilon


class Adamax(_Hyper):
    """Adamax, Adam with the infinity norm (lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7)."""

    _torch_class = rules_extra.AdamaxRule
    _hyper = ("beta_1", "beta_2", "epsilon")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Adamax", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon


class Ftrl(_Hyper):
    """FTRL-proximal (lr 0.001, learning_rate_power -0.5, initial_accumulator_value 0.1, L1/L2/shrinkage 0, beta 0)."""

    _torch_class = rules_extra.FtrlRule
    _hyper = ("learning_rate_power", "initial_accumulator_value", "l1_regularization_strength",
              "l2_regularization_strength", "l2_shrinkage_regularization_strength", "beta")

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, name="Ftrl", **kwargs):
        _non_negative(initial_accumulator_value=initial_accumulator_value,
                      l1_regularization_strength=l1_regularization_strength,
                      l2_regularization_strength=l2_regularization_strength,
                      l2_shrinkage_regularization_strength=l2_shrinkage_regularization_strength)
        if learning_rate_power > 0:
            raise ValueError("`learning_rate_power` needs to be negative or zero. "
                             f"Received: learning_rate_power={learning_rate_power!r}")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.learning_rate_power, self.initial_accumulator_value = learning_rate_power, initial_accumulator_value
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self.beta = beta


class Lion(_Hyper):
    """Lion, sign of an interpolated momentum (lr 0.001, beta_1 0.9, beta_2 0.99)."""

    _torch_class = rules_extra.LionRule
    _hyper = ("beta_1", "beta_2")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, name="Lion", **kwargs):
        if not 0 < beta_1 <= 1:
            raise ValueError("Argument `beta_1` must be in the (0, 1] range. Otherwise, the optimizer degenerates "
                             f"to SignSGD. Received: beta_1={beta_1!r}")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2 = beta_1, beta_2


class Lamb(_Hyper):
    """Lamb, Adam with a layer-wise trust ratio (lr 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7): keras.io's
    Perceiver trains with it."""

    _torch_class = rules_extra.LambRule
    _hyper = ("beta_1", "beta_2", "epsilon")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
