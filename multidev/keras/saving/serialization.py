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


def registered_name(obj) -> str | None:
    """``package>name`` of a class or function registered with ``register_keras_serializable`` (else None)."""
    return next((name for registered, name in _REGISTERED.items() if registered is obj), None)


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
    if _own_build_config(layer) and layer.built:
        out["build_config"] = layer.get_build_config()
    return out


def _own_build_config(layer) -> bool:
    """Whether the layer's class overrides ``get_build_config``/``build_from_config`` (md.keras rebuilds other
    layers by replaying their calls; these may build from other arguments, so loading builds them first)."""
    from multidev.keras.layers.base import Layer
    cls = type(layer)
    return (cls.get_build_config is not Layer.get_build_config) or (cls.build_from_config is not Layer.build_from_config)


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
        layer = cls.from_config(cfg, custom_objects=custom_objects)
    else:
        layer = cls.from_config(cfg)
    if config.get("build_config") and not layer.built:   # Keras 3's order: built before the weights are read
        layer.build_from_config(config["build_config"])
    return layer


def serialize_keras_object(obj):
    """Keras 3's ``serialize_keras_object`` for what md.keras configs hold: a layer or model (its
    ``serialize_layer`` dict), a registered function (its ``package>name``), None and plain values as they are.

    Example (keras.io's nested sublayer): ``config["sublayer"] = keras.saving.serialize_keras_object(self.sublayer)``.
    """
    from multidev.keras.layers.base import Layer
    if isinstance(obj, Layer):
        return serialize_layer(obj)
    if obj is None or isinstance(obj, (bool, int, float, str, list, tuple, dict)):
        return obj
    name = registered_name(obj)
    if name is not None:
        return name
    raise TypeError(f"Cannot serialize {obj!r} ({type(obj).__name__}): md.keras serializes layers, models, functions "
                    "registered with @keras.saving.register_keras_serializable(), None and plain Python values. "
                    "Register the function, or store what rebuilds the object in get_config().")


def deserialize_keras_object(config, custom_objects=None, safe_mode=True, **kwargs):
    """The object of ``serialize_keras_object(obj)``: a layer or model from its dict, a registered function from
    its name (``custom_objects`` first), anything else as it is."""
    if isinstance(config, dict) and "class_name" in config:
        return deserialize_layer(config, custom_objects)
    if isinstance(config, str):
        for table in (custom_objects or {}, _CUSTOM):
            if config in table:
                return table[config]
    return config
