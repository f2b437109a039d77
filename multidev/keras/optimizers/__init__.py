"""``md.keras.optimizers``: Keras optimizers (Keras 3's update rules, foreach kernels), and ``schedules``.

Example:
    model.compile(optimizer="nadam", loss="sparse_categorical_crossentropy")
    model.compile(optimizer=md.keras.optimizers.Adam(1e-3), loss="mse")
"""

from __future__ import annotations

from multidev.keras.optimizers import schedules
from multidev.keras.optimizers.base import Optimizer
from multidev.keras.optimizers.builtin import SGD, Adagrad, Adam, AdamW, Nadam, RMSprop
from multidev.keras.optimizers.builtin_extra import Adadelta, Adamax, Ftrl, Lamb, Lion

_CLASSES = {c.__name__: c for c in (SGD, Adam, AdamW, Nadam, RMSprop, Adagrad, Adadelta, Adamax, Ftrl, Lamb, Lion)}
_NAMES = {name.lower(): cls for name, cls in _CLASSES.items()}


def get(identifier, custom_objects=None) -> Optimizer:
    """Resolve 'adam', 'sgd', 'nadam', ... (case-insensitive), a config dict or an Optimizer; a config's
    custom optimizer class or learning-rate schedule comes from ``custom_objects`` (name -> class) or the
    registered ones (``register_keras_serializable``, ``custom_object_scope``)."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, dict) and identifier.get("class_name") == "LossScaleOptimizer":
        from multidev.keras.mixed_precision import LossScaleOptimizer

        return LossScaleOptimizer.from_config(identifier.get("config", {}))
    if isinstance(identifier, dict):
        from multidev.keras.saving.serialization import custom_object_scope, get_custom_objects

        name = identifier["class_name"]
        cls = (custom_objects or {}).get(name) or get_custom_objects().get(name) or _CLASSES.get(name)
        if cls is None:
            raise ValueError(f"Unknown optimizer: {name!r}. Pass it in `custom_objects=` (or register it with "
                             "keras.saving.register_keras_serializable) when loading, e.g. load_model(path, "
                             f"custom_objects={{{name!r}: {name}}}). Built-in: {sorted(_CLASSES)}.")
        with custom_object_scope(custom_objects or {}):   # a custom schedule in the config, as Keras 3 finds it
            return cls.from_config(identifier.get("config", {}))
    if isinstance(identifier, str) and identifier.lower() in _NAMES:
        return _NAMES[identifier.lower()]()
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}. "
                     f"Valid names: {sorted(_NAMES)} or an Optimizer instance.")


def serialize(optimizer: Optimizer) -> dict:
    """Config form of a built-in optimizer."""
    return {"class_name": type(optimizer).__name__, "config": optimizer.get_config()}


def deserialize(config: dict) -> Optimizer:
    return get(config)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Ftrl", "Lamb", "Lion",
           "schedules", "get", "serialize",
           "deserialize"]
