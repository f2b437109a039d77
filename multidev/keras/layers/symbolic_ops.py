"""Ops on functional KerasTensors: ``x = inputs / 255.0``, ``ops.concatenate([a, b])``, ``md.reduce_mean(x, 1)``.

Keras 3 turns an op called on KerasTensors into a node of the graph (an ``Operation``: ``add (Add)`` in
the summary, not in ``model.layers``); tf.keras 2 into a ``TFOpLambda`` layer (``tf.concat``, listed in
``model.layers``). Here each such call makes an ``OpLayer``: it holds the op and its non-tensor arguments
(a template whose tensor leaves are slots), infers its output's shape and dtype by running the op on
zeros (two sizes for each unknown dim, batch included), and replays the op on the node's tensors when
the model runs. Ops are saved by their public name (``keras.ops.add``, ``tf.concat``), never pickled.

Example:
    inputs = md.keras.Input((784,))
    x = md.keras.layers.Dense(64)(inputs / 255.0)
    x = x + md.keras.layers.Dense(64)(x)               # a residual sum
    model = md.keras.Model(inputs, md.keras.ops.mean(x, axis=1))
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import torch

from multidev._core import symbolic
from multidev._core.eager_tensor import eager
from multidev.keras.layer_calls import outside_layers
from multidev.keras import backend
from multidev.keras.layers import keras_tensor as kt
from multidev.keras.layers.base import Layer

MODULE = "multidev.keras.ops"     # the "module" of an op node's saved config
_FUNCTIONS: dict = {}             # saved name -> the op (unwrapped), for loading
_CLASSES: dict = {}               # display type ("Add", "TFOpLambda") -> its OpLayer subclass
_RUNS = (((2, 24), (3, 25)), ((2, 8), (3, 9)), ((2, 4), (3, 5)), ((2, 2), (3, 3)))   # (batch, unknown dim) pairs


class _Slot:
    """Where the node's i-th input tensor goes in the op's arguments."""

    def __init__(self, index):
        self.index = index


class OpLayer(Layer):
    """One op call in a functional graph; its class name is the op's type (``Add``, ``TFOpLambda``)."""

    listed = False   # in ``model.layers`` (tf.keras 2's TFOpLambda is; Keras 3's operations are not)

    def __init__(self, function, template, key=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self._function, self._template, self._key = function, template, key
        self.built = True

    def __call__(self, inputs, **kwargs):
        """Symbolic inputs (a list of KerasTensors) add a node; tensors run the op (no autocast: an op keeps dtypes)."""
        if kt.is_symbolic(inputs):
            return _add_node(self, list(inputs))
        return self.call(inputs)

    def call(self, inputs):
        args, kwargs = _fill(self._template, list(inputs))
        return self._function(*args, **kwargs)

    def get_config(self) -> dict:
        if self._key is None:
            raise ValueError(
                f"Cannot save the op node '{self.name}' ({self._function!r}): multidev saves only the ops of "
                "md.keras.ops, md.keras.activations and md.* by name (any other callable would need pickle). "
                "Wrap the computation in a custom Layer registered with "
                "@md.keras.saving.register_keras_serializable() (or a Lambda layer, whose model saves its weights "
                "with save_weights()).")
        return {"name": self.name, "function": self._key, "arguments": _encode(self._template, self.name)}


def _op_class(type_name: str, listed: bool):
    cls = _CLASSES.get(type_name)
    if cls is None:
        cls = _CLASSES[type_name] = type(type_name, (OpLayer,), {"__module__": __name__, "listed": listed,
                                                                  "__doc__": f"The op node ``{type_name}``."})
    return cls


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _describe(key):
    """``(type name, base layer name, listed)`` for a saved name: Keras 3's for md.keras's ops, tf.keras 2's
    ``TFOpLambda`` for the TF-named ``md.*`` ops and torch functions."""
    namespace, _, name = key.rpartition(".")
    if namespace.startswith("keras."):
        return _camel(name), name, False
    return "TFOpLambda", key, True


# ----- building a node ----------------------------------------------------------------------------
def _template(args, kwargs):
    """``(template, tensors)``: the arguments with each KerasTensor replaced by a slot, and the KerasTensors."""
    tensors: list = []

    def slot(x):
        if isinstance(x, kt.KerasTensor):
            tensors.append(x)
            return _Slot(len(tensors) - 1)
        return x
    return kt.map_structure(slot, (list(args), dict(kwargs))), tensors


def _fill(template, values):
    args, kwargs = kt.map_structure(lambda x: values[x.index] if isinstance(x, _Slot) else x, template)
    return args, kwargs


def symbolic_call(function, key, args, kwargs, display=None):
    """Call ``function`` on arguments holding KerasTensors: a new op node's output KerasTensor(s)."""
    type_name, base, listed = display or _describe(key)
    template, tensors = _template(args, kwargs)
    layer = _op_class(type_name, listed)(function, template, key=key, name=backend.unique_name(base))
    return _add_node(layer, tensors)


def _zeros(t, batch, size):
    shape = [batch if i == 0 and d is None else (size if d is None else d) for i, d in enumerate(t.shape)]
    return torch.zeros(shape, dtype=t.dtype)


def _run(layer, tensors, batch, size):
    with torch.no_grad():
        return layer.call([_zeros(t, batch, size) for t in tensors])


def _infer(layer, tensors):
    """The op's outputs on zeros at two (batch, unknown-dim) sizes; a dim that changes with them is None."""
    first = None
    for run_a, run_b in _RUNS:
        try:
            return _run(layer, tensors, *run_a), _run(layer, tensors, *run_b)
        except (ValueError, IndexError, RuntimeError) as error:
            first = first or error
    raise ValueError(f"Cannot apply the op '{layer.name}' ({type(layer).__name__}) to "
                     f"{[t for t in tensors]!r}: {first}") from first


def _to_kt(a, b, name):
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"The op '{name}' on KerasTensors returned {type(a).__name__} {a!r}, not a tensor; "
                        "only ops that return tensors can be nodes of a functional model.")
    shape = tuple(None if a.shape[i] != b.shape[i] else a.shape[i] for i in range(a.ndim))
    return kt.KerasTensor(shape, a.dtype)


def _add_node(layer, tensors):
    out_a, out_b = _infer(layer, tensors)
    if isinstance(out_a, (list, tuple)):
        outputs = type(out_a)(_to_kt(a, b, layer.name) for a, b in zip(out_a, out_b))
    else:
        outputs = _to_kt(out_a, out_b, layer.name)
    flat = kt.flatten(outputs)
    for i, out in enumerate(flat):
        out._keras_history = (layer, len(layer._inbound_nodes), i)
    layer._inbound_nodes.append(kt.Node(layer, tensors, flat, {}))
    layer._record_output_shape(outputs)
    return outputs


# ----- dispatch -------------------------------------------------------------------------------
def dispatching(function, key):
    """``function``, building an op node when an argument (nested in lists too) is a KerasTensor."""
    raw = inspect.unwrap(function)
    _FUNCTIONS.setdefault(key, raw)

    @functools.wraps(function)
    def op(*args, **kwargs):
        if _symbolic(args) or (kwargs and _symbolic(kwargs)):
            return symbolic_call(raw, key, args, kwargs)
        out = function(*args, **kwargs)
        return _readable(out) if outside_layers() else out
    op._md_symbolic = True
    return op


def _readable(out):
    """An op's result as the program gets it outside every layer: its tensors (alone, or in a list or tuple)
    ``EagerTensor``s, as TensorFlow's eager results (``ops.squeeze(actor_model(state)).numpy()``, keras.io's
    DDPG policy; ``rewards + gamma * ops.amax(q, axis=1)`` with a Python list of rewards, its DQN)."""
    if type(out) in (list, tuple):
        return type(out)(eager(o) for o in out)
    return eager(out)


def _symbolic(value) -> bool:
    return symbolic.contains(value, _KERAS_TENSOR)


_KERAS_TENSOR = (kt.KerasTensor,)


def md_op_handler(function, public, args, kwargs):
    """``_core.symbolic``'s handler: a TF-named ``md.*`` op on KerasTensors (``tf.math.X`` for ``md.math``'s)."""
    from multidev import math as md_math
    key = f"tf.math.{public}" if public in md_math.__all__ else f"tf.{public}"
    return symbolic_call(function, key, args, kwargs)


def resolve(key: str):
    """The op saved as ``key`` (md.keras's ops and activations, ``md.*``); a ValueError for any other name."""
    if key not in _FUNCTIONS and key.startswith("tf."):
        import multidev
        name = key.rpartition(".")[2]
        fn = getattr(multidev.math if key.startswith("tf.math.") else multidev, name, None)
        if getattr(fn, "_md_public_name", None) == name:
            _FUNCTIONS[key] = inspect.unwrap(fn)
    if key not in _FUNCTIONS:
        raise ValueError(f"Unknown op {key!r} in a saved functional model: multidev loads the ops of md.keras.ops, "
                         "md.keras.activations and md.* by name. Was the file written by another program?")
    return _FUNCTIONS[key]


# ----- config ---------------------------------------------------------------------------------
def _encode(value, name):
    if isinstance(value, _Slot):
        return {"class_name": "__keras_tensor__", "config": {"index": value.index}}
    if isinstance(value, tuple):
        return {"class_name": "__tuple__", "config": [_encode(v, name) for v in value]}
    if isinstance(value, list):
        return [_encode(v, name) for v in value]
    if isinstance(value, dict):
        return {"class_name": "__dict__", "config": {k: _encode(v, name) for k, v in value.items()}}
    if isinstance(value, slice):
        return {"class_name": "__slice__", "config": {"start": _encode(value.start, name),
                                                      "stop": _encode(value.stop, name),
                                                      "step": _encode(value.step, name)}}
    if value is Ellipsis:
        return {"class_name": "__ellipsis__", "config": {}}
    if isinstance(value, torch.dtype):
        return {"class_name": "__dtype__", "config": str(value).replace("torch.", "")}
    if isinstance(value, (torch.Tensor, np.ndarray)):
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
        return {"class_name": "__tensor__", "config": {"value": array.tolist(), "dtype": array.dtype.name,
                                                       "torch": isinstance(value, torch.Tensor)}}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"Cannot save the op node '{name}': its argument {value!r} ({type(value).__name__}) has no "
                     "JSON form (numbers, strings, slices, dtypes, tensors and lists of them do).")


_DECODERS = {
    "__keras_tensor__": lambda c: _Slot(c["index"]),
    "__tuple__": lambda c: tuple(_decode(v) for v in c),
    "__dict__": lambda c: {k: _decode(v) for k, v in c.items()},
    "__slice__": lambda c: slice(_decode(c["start"]), _decode(c["stop"]), _decode(c["step"])),
    "__ellipsis__": lambda c: Ellipsis,
    "__dtype__": lambda c: getattr(torch, c) if isinstance(getattr(torch, c, None), torch.dtype) else _bad(c),
    "__tensor__": lambda c: (torch.from_numpy if c["torch"] else (lambda a: a))(np.array(c["value"], dtype=c["dtype"])),
}


def _bad(value):
    raise ValueError(f"Corrupt op node config: {value!r} is not a dtype.")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return _DECODERS[value["class_name"]](value["config"])
    return value


def is_op_config(config: dict) -> bool:
    return config.get("module") == MODULE


def serialize(layer) -> dict:
    return {"module": MODULE, "class_name": type(layer).__name__, "config": layer.get_config()}


def deserialize(config: dict):
    """The op node layer saved as ``serialize(layer)`` (its node is added when the graph is replayed)."""
    cfg = config["config"]
    key = cfg["function"]
    type_name, _, listed = _describe(key)
    return _op_class(type_name, listed)(resolve(key), _decode(cfg["arguments"]), key=key, name=cfg["name"])


# ----- installation -----------------------------------------------------------------------------
_NOT_OPS = {"is_tensor", "standardize_dtype", "convert_to_numpy", "cond", "fori_loop", "while_loop", "get",
            "serialize", "deserialize", "keep_logits", "take_logits", "vectorize", "custom_gradient"}
_STATIC = {"shape": lambda x: tuple(x.shape), "dtype": lambda x: str(x.dtype).replace("torch.", "")}


def _static(function, name):
    """``ops.shape``/``ops.dtype`` of a KerasTensor: its static value, as Keras 3 gives it."""
    @functools.wraps(function)
    def op(x, *args, **kwargs):
        return _STATIC[name](x) if isinstance(x, kt.KerasTensor) else function(x, *args, **kwargs)
    op._md_symbolic = True
    return op


def _install_module(module, prefix, namespace=None) -> dict:
    """Wrap ``module``'s own public functions in place (and in ``namespace``); ``{id(raw): wrapper}``."""
    done: dict = {}
    for name, fn in list(vars(module).items()):
        if (name.startswith("_") or name in _NOT_OPS or not inspect.isfunction(fn)
                or fn.__module__ != module.__name__ or getattr(fn, "_md_symbolic", False)):
            continue
        wrapped = _static(fn, name) if name in _STATIC else dispatching(fn, f"{prefix}.{name}")
        done.setdefault(id(fn), wrapped)
        setattr(module, name, wrapped)
        if namespace is not None and namespace.get(name) is fn:
            namespace[name] = wrapped
    return done


def _install_activations(activations) -> None:
    """Activations by attribute and by ``get(name)`` are the same objects (``is`` checks, ``serialize``);
    those that are torch functions (``tanh``) keep their identity and get a saved name for torch dispatch."""
    done = _install_module(activations, "keras.activations")
    table = activations._BY_NAME
    for name, fn in list(table.items()):
        if id(fn) in done:
            table[name] = done[id(fn)]
        elif not inspect.isfunction(fn) or fn.__module__ != activations.__name__:
            key = f"keras.activations.{name}"
            TORCH_KEYS.setdefault(fn, key)
            _FUNCTIONS.setdefault(key, fn)


#: torch functions with a saved name (md.keras.activations' ``tanh`` is ``torch.tanh``).
TORCH_KEYS: dict = {}


def install() -> None:
    """Make md.keras.ops, md.keras.activations and the ``md.*`` ops build nodes on KerasTensors (once, at import)."""
    from multidev.keras import activations, ops
    done: dict = {}
    for module in (ops.core, ops.elementwise, ops.nn, ops.numpy, ops.image, *ops.MORE_MODULES):
        done.update(_install_module(module, "keras.ops", vars(ops)))
    for space in (ops.nn, ops.linalg):   # names they re-export from the modules above: the same wrappers
        for name, fn in list(vars(space).items()):
            if not name.startswith("_") and id(fn) in done:
                setattr(space, name, done[id(fn)])
    _install_activations(activations)
    _FUNCTIONS.setdefault("keras.ops.get_item", _get_item())
    symbolic.register(_KERAS_TENSOR, md_op_handler)


def _get_item():
    from multidev.keras.layers.tensor_operators import get_item
    return get_item
