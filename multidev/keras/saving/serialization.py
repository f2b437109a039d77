"""Layer (de)serialization by class name, with ``custom_objects`` and ``custom_object_scope``.

Example:
    config = md.keras.saving.serialize_layer(layer)        # {"class_name": "Dense", "config": {...}}
    clone = md.keras.saving.deserialize_layer(config)
"""

from __future__ import annotations

import contextlib

_CUSTOM: dict = {}
_REGISTERED: dict = {}   # class -> "package>name" (Keras 3's registered_name, written beside class_name)


def get_custom_objects() -> dict:
    """The global dict of registered custom classes and functions (name -> object)."""
    return _CUSTOM


@contextlib.contextmanager
def custom_object_scope(*scopes):
    """Temporarily register custom objects (dicts of name -> class)."""
    saved = dict(_CUSTOM)
    for scope in scopes:
        _CUSTOM.update(scope)
    try:
        yield
    finally:
        _CUSTOM.clear()
        _CUSTOM.update(saved)


def register_keras_serializable(package="Custom", name=None):
    """Decorator registering a class under ``package>name`` and its plain name."""
    def decorator(obj):
        key = name or obj.__name__
        _CUSTOM[f"{package}>{key}"] = obj
        _CUSTOM[key] = obj
        _REGISTERED[obj] = f"{package}>{key}"
        return obj
    return decorator


def _builtins() -> dict:
    from multidev.keras import layers as L
    from multidev.keras.models.functional import Functional
    from multidev.keras.models.sequential import Sequential
    table = {name: getattr(L, name) for name in L.__all__ if isinstance(getattr(L, name), type)}
    table.update({"Sequential": Sequential, "Functional": Functional, "Model": Functional})
    return table


def serialize_layer(layer) -> dict:
    """``{"class_name", "config"}`` of a layer or model (plus ``registered_name`` for a registered class)."""
    from multidev.keras.layers import symbolic_ops
    if isinstance(layer, symbolic_ops.OpLayer):   # an op node: saved by the op's name (never pickled)
        return symbolic_ops.serialize(layer)
    out = {"class_name": type(layer).__name__, "config": layer.get_config()}
    if type(layer) in _REGISTERED:
        out["registered_name"] = _REGISTERED[type(layer)]
    return out


def resolve_class(class_name, custom_objects=None):
    """The class registered as ``class_name`` (custom objects first, then built-ins)."""
    for table in (custom_objects or {}, _CUSTOM, _builtins()):
        if class_name in table:
            return table[class_name]
    raise ValueError(f"Unknown layer: {class_name!r}. Please ensure you are passing it in `custom_objects=` "
                     "(or a `custom_object_scope`) when loading, e.g. load_model(path, custom_objects="
                     f"{{{class_name!r}: {class_name}}}).")


def deserialize_layer(config: dict, custom_objects=None):
    """Rebuild a layer/model from ``serialize_layer`` output."""
    from multidev.keras.layers import symbolic_ops
    if symbolic_ops.is_op_config(config):
        return symbolic_ops.deserialize(config)
    registered = config.get("registered_name")
    known = registered is not None and any(registered in t for t in (custom_objects or {}, _CUSTOM))
    cls = resolve_class(registered if known else config["class_name"], custom_objects)
    cfg = config.get("config", {})
    from multidev.keras.models.model import Model
    if isinstance(cls, type) and issubclass(cls, Model) and "custom_objects" in cls.from_config.__code__.co_varnames:
        return cls.from_config(cfg, custom_objects=custom_objects)
    return cls.from_config(cfg)
