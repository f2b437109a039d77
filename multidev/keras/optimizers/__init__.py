"""``md.keras.optimizers``: Keras optimizers (Keras 3's update rules, foreach kernels), and ``schedules``.

Example:
    model.compile(optimizer="nadam", loss="sparse_categorical_crossentropy")
    model.compile(optimizer=md.keras.optimizers.Adam(1e-3), loss="mse")
"""

from __future__ import annotations

from multidev.keras.optimizers import schedules
from multidev.keras.optimizers.base import Optimizer
from multidev.keras.optimizers.builtin import SGD, Adagrad, Adam, AdamW, Nadam, RMSprop
from multidev.keras.optimizers.builtin_extra import Adadelta, Adamax, Ftrl, Lion

_CLASSES = {c.__name__: c for c in (SGD, Adam, AdamW, Nadam, RMSprop, Adagrad, Adadelta, Adamax, Ftrl, Lion)}
_NAMES = {name.lower(): cls for name, cls in _CLASSES.items()}


def get(identifier) -> Optimizer:
    """Resolve 'adam', 'sgd', 'nadam', ... (case-insensitive), a config dict or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict) and identifier.get("class_name") == "LossScaleOptimizer":
        from multidev.keras.mixed_precision import LossScaleOptimizer

        return LossScaleOptimizer.from_config(identifier.get("config", {}))
    if isinstance(identifier, dict):
        return _CLASSES[identifier["class_name"]].from_config(identifier.get("config", {}))
    if isinstance(identifier, str) and identifier.lower() in _NAMES:
        return _NAMES[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}. "
                     f"Valid names: {sorted(_NAMES)} or an Optimizer instance.")


def serialize(optimizer: Optimizer) -> dict:
    """Config form of a built-in optimizer."""
    return {"class_name": type(optimizer).__name__, "config": optimizer.get_config()}


def deserialize(config: dict) -> Optimizer:
    return get(config)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Ftrl", "Lion",
           "schedules", "get", "serialize",
           "deserialize"]
