"""Saving subclassed models without ``get_config``: the class's import path plus an input signature.

Keras 3 needs ``get_config`` (or registered custom objects) to save a subclassed model. multidev
also saves one that has neither: ``config.json`` names the class (``module`` and ``qualname``, no
pickle) and the input signature of the model's first call (shapes with ``None`` batch and dtypes).
``load_model`` imports the class (it must be importable at module level, or be given in
``custom_objects``), calls it with no arguments, runs it once on zeros of the recorded signature
to create the weights, then loads them.

Example:
    net = MyNet(); net(x); net.save("net.keras")
    restored = md.keras.models.load_model("net.keras")     # imports MyNet from its module
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import torch

CLASS_KEY = "subclassed_model"


def signature(inputs: Any) -> Any:
    """``{"shape", "dtype"}`` per input tensor (lists kept), batch dimension as None."""
    if isinstance(inputs, (list, tuple)):
        return [signature(x) for x in inputs]
    if isinstance(inputs, dict):
        return {k: signature(v) for k, v in inputs.items()}
    shape = [None] + [None if d is None else int(d) for d in tuple(inputs.shape)[1:]]
    return {"shape": shape, "dtype": str(inputs.dtype).replace("torch.", "")}


def _zeros(spec: Any) -> Any:
    if isinstance(spec, list):
        return [_zeros(s) for s in spec]
    if "shape" not in spec:
        return {k: _zeros(v) for k, v in spec.items()}
    return torch.zeros([1 if d is None else d for d in spec["shape"]], dtype=getattr(torch, spec["dtype"]))


def describe(model: Any) -> dict:
    """The JSON entry naming ``model``'s class and input signature (ValueError if it cannot be rebuilt)."""
    cls = type(model)
    if "<locals>" in cls.__qualname__:
        raise ValueError(
            f"Cannot save subclassed model {model.name!r}: its class {cls.__qualname__!r} is defined inside a "
            "function, so load_model could not import it. Define the class at module level, or implement "
            "get_config()/from_config() (Keras's way), or save the weights with save_weights().")
    required = [p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise ValueError(
            f"Cannot save subclassed model {model.name!r}: {cls.__qualname__}.__init__ requires {required!r}, so "
            "load_model could not re-create it. Implement get_config()/from_config() (Keras's way), give those "
            "arguments defaults, or save the weights with save_weights().")
    sig = model.__dict__.get("_input_signature")
    if sig is None:
        raise ValueError(
            f"Cannot save subclassed model {model.name!r} before it is built: call it on a batch (or fit it) "
            "first, so that load_model can create its weights.")
    return {"module": cls.__module__, "qualname": cls.__qualname__, "input_signature": sig}


def _import(entry: dict, custom_objects: dict | None) -> type:
    from multidev.keras.models.model import Model

    name = entry["qualname"]
    cls = (custom_objects or {}).get(name) or (custom_objects or {}).get(name.rsplit(".", 1)[-1])
    if cls is None:
        try:
            obj: Any = importlib.import_module(entry["module"])
            for part in name.split("."):
                obj = getattr(obj, part)
            cls = obj
        except (ImportError, AttributeError) as err:
            raise ValueError(
                f"Cannot load subclassed model class {entry['module']}:{name}: {type(err).__name__}: {err}. Make "
                f"the class importable (its module on sys.path), or pass custom_objects={{{name!r}: {name}}}."
            ) from None
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise ValueError(f"{entry['module']}:{name} is {cls!r}, not a md.keras.Model subclass; refusing to load it.")
    return cls


def rebuild(entry: dict, custom_objects: dict | None = None) -> Any:
    """A fresh, built instance of the class ``entry`` names (weights not yet loaded)."""
    cls = _import(entry, custom_objects)
    try:
        model = cls()
    except TypeError as err:
        raise ValueError(
            f"Cannot re-create {cls.__qualname__}: calling {cls.__qualname__}() failed ({err}). A subclassed model "
            "saved without get_config must be constructible with no arguments; otherwise implement "
            "get_config()/from_config().") from err
    with torch.no_grad():
        model(_zeros(entry["input_signature"]))
    return model


__all__ = ["CLASS_KEY", "signature", "describe", "rebuild"]
