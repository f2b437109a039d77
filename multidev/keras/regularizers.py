"""``md.keras.regularizers``: weight and activity penalties (Keras's L1, L2, L1L2), added to the loss.

A regularizer is a callable ``tensor -> scalar``. Layers take them as ``kernel_regularizer``,
``bias_regularizer`` (weights: evaluated on the current weights whenever ``layer.losses`` is read)
and ``activity_regularizer`` (outputs: recorded at each call, divided by the batch size as Keras 3
does). ``fit`` adds ``model.losses`` to the compiled loss, divided by the number of replicas so that
summing gradients across replicas counts each penalty once.

Example:
    layer = md.keras.layers.Dense(4, kernel_regularizer=md.keras.regularizers.L2(1e-4))
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
import torch

__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize"]


class Regularizer:
    """Base class: ``__call__(x)`` returns a scalar penalty; ``get_config`` rebuilds it."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(())

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


def _factor(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0 \
            or value == float("inf"):
        raise ValueError(f"Value for argument `{name}` must be a non-negative finite float. Received: {name}={value!r}")
    return float(value)


class L1L2(Regularizer):
    """``l1 * sum(|x|) + l2 * sum(x ** 2)``.

    Example:
        >>> md.keras.regularizers.L1L2(l1=0.1, l2=0.1)(torch.tensor([1.0, -2.0]))
        tensor(0.8000)
    """

    def __init__(self, l1=0.0, l2=0.0):
        self.l1, self.l2 = _factor("l1", l1), _factor("l2", l2)

    def __call__(self, x):
        total = x.new_zeros(())
        if self.l1:
            total = total + self.l1 * x.abs().sum()
        if self.l2:
            total = total + self.l2 * x.square().sum()
        return total

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


class L1(Regularizer):
    """``l1 * sum(|x|)`` (default 0.01).

    Example:
        >>> layer = md.keras.layers.Dense(4, kernel_regularizer=md.keras.regularizers.L1(1e-3))
    """

    def __init__(self, l1=0.01):
        self.l1 = _factor("l1", l1)

    def __call__(self, x):
        return self.l1 * x.abs().sum()

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    """``l2 * sum(x ** 2)`` (default 0.01).

    Example:
        >>> md.keras.regularizers.L2(0.5)(torch.tensor([1.0, 2.0]))
        tensor(2.5000)
    """

    def __init__(self, l2=0.01):
        self.l2 = _factor("l2", l2)

    def __call__(self, x):
        return self.l2 * x.square().sum()

    def get_config(self):
        return {"l2": self.l2}


l1, l2, l1_l2 = L1, L2, L1L2
_BY_NAME = {"L1": L1, "L2": L2, "L1L2": L1L2, "l1": L1, "l2": L2, "l1_l2": L1L2}


def serialize(regularizer) -> dict | None:
    """``{"class_name", "config"}`` of a built-in regularizer (None stays None)."""
    if regularizer is None:
        return None
    if not isinstance(regularizer, Regularizer):
        raise ValueError(f"Cannot serialize {regularizer!r}: only md.keras.regularizers.Regularizer objects can be "
                         "saved. Subclass Regularizer and implement get_config().")
    return {"class_name": type(regularizer).__name__, "config": regularizer.get_config()}


def deserialize(config, custom_objects=None):
    """Rebuild a regularizer from ``serialize`` output or a name."""
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"Could not interpret regularizer config: {config!r}. Expected "
                         "{'class_name': ..., 'config': {...}} or a name such as 'l2'.")
    cls = (custom_objects or {}).get(config["class_name"]) or _BY_NAME.get(config["class_name"])
    if cls is None:
        raise ValueError(f"Unknown regularizer: {config['class_name']!r}. Valid: {sorted(_BY_NAME)}, or pass "
                         "custom_objects=.")
    return cls.from_config(config.get("config", {}))


def get(identifier):
    """A regularizer from None, a name ('l1', 'l2', 'l1_l2'), a config dict or a callable.

    Example:
        >>> md.keras.regularizers.get("l2").l2
        0.01
    """
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}. Valid names: "
                             f"{sorted(_BY_NAME)}.")
        return _BY_NAME[identifier]()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}. Expected None, a name, a config "
                     "dict or a callable.")

__getattr__ = missing_names(__name__, 'regularizers', globals())  # unknown names: does Keras 3 have them?
