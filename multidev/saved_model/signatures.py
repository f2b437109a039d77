"""Which functions of an object ``md.saved_model.save`` exports, with their input specs and output names."""

from __future__ import annotations

import inspect
import reprlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from multidev.data.spec import TensorSpec

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"


@dataclass(frozen=True)
class Signature:
    """A function of tensors to export: ``fn(*inputs)``, its input specs, how its outputs are named."""
    fn: Callable
    inputs: tuple[TensorSpec, ...]
    input_names: tuple[str, ...]
    output_names: Callable[[Any], list[str]]
    module: Any = None  # the nn.Module whose weights the function reads (traced as plain tensors)
    traced_call: bool = False   # one of the shapes an md.function without input_signature was called with


def _flat_specs(signature: Any, where: str) -> tuple[TensorSpec, ...]:
    specs = tuple(signature) if isinstance(signature, (list, tuple)) else (signature,)
    for spec in specs:
        if not isinstance(spec, TensorSpec) or spec.shape is None or spec.dtype is str:
            raise TypeError(f"{where}: every input_signature entry must be an md.TensorSpec with a known rank and a "
                            f"tensor dtype; received {spec!r}.")
    return specs


def _generic_output_names(outputs: Any) -> list[str]:
    if isinstance(outputs, dict):
        return [str(k) for k in outputs]
    if isinstance(outputs, (list, tuple)):
        return [f"output_{i}" for i in range(len(outputs))]
    return ["output_0"]


def _from_function(fn: Callable, where: str) -> Signature:
    signature = getattr(fn, "input_signature", None)
    if signature is None:
        raise ValueError(f"{where} has no input signature. Decorate it with md.function(input_signature=[md.TensorSpec("
                         "shape, dtype), ...]) so its inputs are known when it is exported.")
    specs = _flat_specs(signature, where)
    target = getattr(fn, "python_function", None)
    params = list(inspect.signature(target if target is not None else fn).parameters)
    if params and params[0] == "self":   # a method: python_function is the function before binding
        params = params[1:]
    names = tuple(spec.name or (params[i] if i < len(params) else f"input_{i}") for i, spec in enumerate(specs))
    module = getattr(fn, "__self__", None)
    return Signature(fn, specs, names, _generic_output_names,
                     module if isinstance(module, torch.nn.Module) else None)


def is_keras(obj: Any) -> bool:
    from multidev.keras.layers.base import Layer
    return isinstance(obj, Layer)


def _input_shape_known(model: Any) -> bool:
    return bool(hasattr(model, "_inputs") and getattr(model, "inputs", None)) or \
        (getattr(model, "_input_batch_shape", None) or getattr(model, "_build_input_shape", None)) is not None


def _keras_signature(model: Any) -> Signature:
    from multidev.keras.layers.core import Embedding
    if hasattr(model, "_inputs") and getattr(model, "inputs", None):
        specs = tuple(TensorSpec(kt.shape, kt.dtype, kt.name if hasattr(kt, "name") else None) for kt in model.inputs)
    else:
        shape = getattr(model, "_input_batch_shape", None) or model._build_input_shape
        if shape is None:
            raise ValueError(f"Model {model.name!r} has no known input shape, so there is nothing to trace. Call it on "
                             "a batch first, give it an Input, or pass signatures= with an md.function(input_signature"
                             "=...).")
        dtype = getattr(model, "_input_dtype", None)
        first = model.layers[0] if getattr(model, "layers", None) else None
        dtype = dtype or (torch.int64 if isinstance(first, Embedding) else torch.float32)
        specs = (TensorSpec((None,) + tuple(shape[1:]), dtype),)
    names = tuple(spec.name or f"input_{i + 1}" for i, spec in enumerate(specs))

    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    # TensorFlow 2.21 (tf.keras is Keras 3) names a Keras model's serving outputs output_0, output_1, ...
    # (a dict's keys for dict outputs), not after its layers.
    return Signature(call, specs, names, _generic_output_names, model)


def keras_serving_signature(model: Any, input_signature=None) -> Signature:
    """A Keras model's inference call, on its known inputs or on ``input_signature`` (``model.export``)."""
    if input_signature is None:
        return _keras_signature(model)
    specs = _flat_specs(input_signature, "input_signature")
    names = tuple(spec.name or f"input_{i + 1}" for i, spec in enumerate(specs))

    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)
    return Signature(call, specs, names, _generic_output_names, model)


def _decorated_methods(obj: Any) -> dict[str, Callable]:
    found = {}
    for name in dir(type(obj)):
        attr = inspect.getattr_static(type(obj), name, None)
        if callable(attr) and getattr(attr, "input_signature", None) is not None:
            found[name] = getattr(obj, name)
    return found


def _traced_calls(obj: Any) -> dict[str, Signature]:
    """``__call__``'s calls, one function per input shape it was called with, when it is an
    ``md.function`` without ``input_signature`` (TensorFlow saves those concrete functions, and the
    loaded object's ``__call__`` takes those shapes; its ``signatures`` stay empty)."""
    attr = inspect.getattr_static(type(obj), "__call__", None)
    traced = getattr(attr, "traced_signatures", None) if getattr(attr, "input_signature", 1) is None else None
    if not traced:
        return {}
    call = obj.__call__
    params = [p for p in inspect.signature(getattr(attr, "python_function", attr)).parameters][1:]
    return {f"call_{i}": Signature(call, specs, tuple(params[j] if j < len(params) else f"input_{j}"
                                                        for j in range(len(specs))),
                                   _generic_output_names, obj if isinstance(obj, torch.nn.Module) else None, True)
            for i, specs in enumerate(traced)}


def resolve(obj: Any, signatures: Any) -> dict[str, Signature]:
    """``{name: Signature}`` to export, as TensorFlow chooses them."""
    if signatures is None:
        methods = _decorated_methods(obj)
        if len(methods) == 1 or "__call__" in methods:
            name, fn = ("__call__", methods["__call__"]) if "__call__" in methods else next(iter(methods.items()))
            return {DEFAULT_SERVING_SIGNATURE_DEF_KEY: _from_function(fn, f"{type(obj).__name__}.{name}")}
        if is_keras(obj):
            if not _input_shape_known(obj):   # TensorFlow saves a model never built or called: no signatures
                return {}
            return {DEFAULT_SERVING_SIGNATURE_DEF_KEY: _keras_signature(obj)}
        if methods:
            raise ValueError(f"{type(obj).__name__} has several md.function methods with input signatures "
                             f"({sorted(methods)}); say which to export: signatures={{'serving_default': obj.method}}.")
        traced = _traced_calls(obj)
        if traced:
            return traced
        raise ValueError(f"Nothing to export from {type(obj).__name__} {reprlib.repr(obj)}: it is not a Keras model "
                         "and has no method decorated with md.function(input_signature=...). Pass signatures=.")
    if callable(signatures) and not isinstance(signatures, dict):
        return {DEFAULT_SERVING_SIGNATURE_DEF_KEY: _from_function(signatures, "signatures")}
    if isinstance(signatures, dict):
        out = {}
        for name, fn in signatures.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"Signature names must be identifiers; received {name!r}.")
            out[name] = _from_function(fn, f"signatures[{name!r}]")
        return out
    raise ValueError(f"signatures must be None, an md.function with an input_signature or a dict of them; received "
                    f"{signatures!r}.")
