"""Layer: a ``torch.nn.Module`` with Keras's lifecycle (lazy build, names, weights, trainable).

Weights made by ``add_weight`` are registered ``nn.Parameter``s (trainable) or buffers
(non-trainable) and are always read back through ``nn.Module`` attribute lookup, so a strategy
can make ``_parameters`` replica-aware. Keras semantics for ``training``: a direct call runs in
inference mode unless ``training=True`` is passed (``nn.Module.training`` is not consulted).
This module holds the call side (build, ``training``, masks, autocast, shapes, config); the weight
side (``add_weight``, the weight listings, ``trainable``, ``get/set_weights``) is the mixin
``LayerWeights`` in ``layer_weights.py``.

Example:
    class Scale(md.keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", shape=(input_shape[-1],), initializer="ones")
        def call(self, x):
            return x * self.w
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import numpy as np
import torch
from torch import nn

from multidev._core.eager_tensor import readable
from multidev.keras import backend, mixed_precision, regularizers
from multidev.keras.layers import keras_tensor as kt
from multidev.keras.layers import (call_inputs, early_attributes, host_inputs, layer_losses, layer_state, tracked_lists,
                                   weight_paths, weights_device)
from multidev.keras.layers.saving_hooks import SavingHooks
from multidev.keras.layer_calls import call_state
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.layer_weights import (  # noqa: F401  (KerasParameter's import path)
    KerasParameter, LayerWeights, _module_weights)
from multidev.values import context
from multidev.values.variables import DistributedVariable  # noqa: F401  (importable from here, as before)

_call_state = call_state   # (training flag, depth) of the innermost enclosing layer call (layer_calls.py)
_NO_SCOPE = contextlib.nullcontext()
_BUILD_LOCK = threading.RLock()
_SIG_CACHE: dict[tuple[type, str], bool] = {}


def current_training():
    """The ``training`` flag of the innermost enclosing layer call in this thread (or None)."""
    return _call_state.get()[0]


def _readable_outputs(outputs):
    """A tensor, or the tensors in nested lists/tuples/dicts (other containers as they are), ``readable``."""
    if type(outputs) is torch.Tensor:
        return readable(outputs)
    if type(outputs) in (list, tuple):
        return type(outputs)(_readable_outputs(o) for o in outputs)
    if type(outputs) is dict:
        return {k: _readable_outputs(v) for k, v in outputs.items()}
    return outputs


def _python_numbers(x) -> bool:
    """A (nested) non-empty list or tuple of Python numbers: one input tensor, as tf.keras converts it."""
    if isinstance(x, (list, tuple)):
        return bool(x) and all(_python_numbers(i) for i in x)
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shape_of(x):
    if isinstance(x, (list, tuple)):
        return [_shape_of(i) for i in x]
    if isinstance(x, dict):
        return {k: _shape_of(v) for k, v in x.items()}
    return tuple(x.shape)


#: How many metrics were ever made layer attributes (0: ``Model.metrics`` need not look for them).
_METRIC_ATTACHMENTS = [0]


_METRIC_CLASS: list = []


def _is_metric(value) -> bool:
    if not _METRIC_CLASS:
        from multidev.keras.metrics.base import Metric   # metrics sit above layers (they use keras_tensor)
        _METRIC_CLASS.append(Metric)
    return isinstance(value, _METRIC_CLASS[0])


def attached_metrics(layer) -> list:
    """The metrics assigned as attributes of ``layer`` and of the layers inside it (Keras 3's
    ``Layer.metrics``), in the order they were assigned, layer by layer."""
    if not _METRIC_ATTACHMENTS[0]:
        return []
    out, seen = [], set()
    for module in layer.modules():
        for name, metric in module.__dict__.get("_attached_metrics", {}).items():
            if module.__dict__.get(name) is metric and id(metric) not in seen:   # still that attribute
                seen.add(id(metric))
                out.append(metric)
    return out


class Layer(LayerWeights, SavingHooks, nn.Module):
    """Base class of all Keras layers (and of Model)."""

    supports_masking = False   # True: the input's mask passes through unchanged (override compute_mask otherwise)

    def __init_subclass__(cls, **kwargs):
        """A subclass's ``build`` marks the layer built, as Keras's does: ``layer.build(shape)`` then
        ``set_weights`` keeps those weights (the first call would otherwise build, and initialise, again)."""
        super().__init_subclass__(**kwargs)
        build = cls.__dict__.get("build")
        if build is not None and not getattr(build, "_marks_built", False):
            @functools.wraps(build)
            def build_and_mark(self, *args, **kw):
                out = build(self, *args, **kw)
                self.built = True
                return out
            build_and_mark._marks_built = True
            cls.build = build_and_mark

    def __init__(self, trainable=True, name=None, dtype=None, input_shape=None,
                 batch_input_shape=None, input_dim=None, activity_regularizer=None, **kwargs):
        early = early_attributes.registered_early(self)   # sublayers assigned before super().__init__()
        super().__init__()
        early_attributes.restore(self, early)
        if kwargs:
            raise TypeError(f"Keyword argument not understood: {sorted(kwargs)!r} (layer {type(self).__name__}).")
        self.activity_regularizer = regularizers.get(activity_regularizer)
        self._call_losses: dict[int, list] = {}           # thread -> losses of its current call (see layer_losses)
        self._weight_regularizers: list[tuple[str, object]] = []
        self.name = name or backend.unique_name(backend.to_snake_case(type(self).__name__))
        self._trainable = bool(trainable)
        self.built = False
        # Made inside a replica function: that replica's own object, built locally (see _maybe_build).
        self._made_in_replica = context.current_replica_id() is not None
        self._weight_specs: list[tuple[str, bool]] = []
        self._dtype_policy = mixed_precision.resolve(dtype)
        self._inbound_nodes: list = []
        self._output_shape = None
        self._build_input_shape = None
        self.input_spec = None
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        if batch_input_shape is not None:
            self._batch_input_shape = tuple(batch_input_shape)
        elif input_shape is not None:
            self._batch_input_shape = (None,) + tuple(input_shape)
        else:
            self._batch_input_shape = None

    def __setattr__(self, name, value):
        # Keras tracks lists/dicts of layers assigned as attributes; torch needs ModuleList/ModuleDict.
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, nn.Module) for v in value):
            value = nn.ModuleList(value)
        elif isinstance(value, dict) and value and all(isinstance(v, nn.Module) for v in value.values()) \
                and all(isinstance(k, str) for k in value):
            value = nn.ModuleDict(value)
        elif _is_metric(value):   # Keras 3 tracks a metric attribute: its model's fit resets and reports it
            attached = self.__dict__.setdefault("_attached_metrics", {})
            attached[name] = value
            _METRIC_ATTACHMENTS[0] += 1
        elif layer_state.is_own_state_alias(self, name, value):   # self.total = self.add_weight(...)
            object.__setattr__(self, name, value)
            return
        elif "_modules" in self.__dict__ and (isinstance(value, (list, tuple))
                                              or name + tracked_lists.SUFFIX in self._modules):
            value = tracked_lists.track(self, name, value)   # layers among other values ([keras.Input(...), FFDense])
        value = layer_state.activation_value(self, name, value)
        layer_state.hand_variable_whole(value)   # self.counter = md.Variable(0.), self.queue = keras.Variable(...)
        early_attributes.start_torch_state(self, value)
        super().__setattr__(name, value)

    # ----- lifecycle -------------------------------------------------------------------------
    def build(self, input_shape):
        """Create weights for inputs of ``input_shape`` (override; called once, on first call)."""
        self._build_input_shape = input_shape

    def call(self, inputs, *args, **kwargs):
        """The layer's computation (override)."""
        return inputs

    def forward(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def _call_accepts(self, argument: str) -> bool:
        key = (type(self), argument)
        if key not in _SIG_CACHE:
            _SIG_CACHE[key] = argument in inspect.signature(type(self).call).parameters
        return _SIG_CACHE[key]

    def _named_extra_args(self, extra) -> dict:
        """Positional arguments after the inputs, by ``call``'s parameter names: a functional graph's node
        replays its call's keyword arguments (keras.io's ``TransformerDecoder(...)(x, encoder_outputs)``)."""
        if not extra:
            return {}
        params = list(inspect.signature(type(self).call).parameters.values())[2:]   # after self, inputs
        named = [p for p in params[:len(extra)]
                 if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        if len(named) < len(extra):
            raise TypeError(
                f'Layer "{self.name}" was called on symbolic inputs with {len(extra)} extra positional argument(s), '
                f"but its call() names only {[p.name for p in named]!r} of them. Pass them by keyword, e.g. "
                f"layer(x, name=value).")
        return {p.name: value for p, value in zip(named, extra)}

    def _call_accepts_training(self) -> bool:
        return self._call_accepts("training")

    def compute_mask(self, inputs, mask=None):
        """The mask of this layer's output: the input's if ``supports_masking``, else None (override)."""
        return mask if self.supports_masking else None

    @property
    def submodules(self) -> tuple:
        """The layers nested in this one, at any depth (tf.Module's ``submodules``, which tf.keras layers
        have; the intro_to_modules guide lists a model's), torch's containers passed through."""
        return tuple(m for m in self.modules() if m is not self and isinstance(m, Layer))

    def add_loss(self, loss):
        """Add a loss to this call (e.g. an activity penalty); ``model.losses`` lists it, ``fit`` adds it."""
        layer_losses.add_call_loss(self, loss)

    add_metric = layer_losses.refuse_add_metric   # Keras 3 removed it: its NotImplementedError and the fix

    @property
    def losses(self) -> list:
        """This call's ``add_loss`` losses of the layer and its sublayers, then its weights' penalties."""
        return layer_losses.collect(self)

    def _maybe_build(self, inputs):
        """Build on first call, once. A layer every replica shares, first called inside ``strategy.run``
        (TensorFlow's tutorials build their models lazily there), is built in ONE ``merge_call``: all
        replicas wait while it runs in cross-replica context, in the strategy's scope, so its weights
        become distributed variables (one copy per replica, equal initial values), as TensorFlow
        creates mirrored variables when a replica builds a layer. Built by whichever replica came
        first, they were plain tensors that every replica read and every replica's optimizer wrote
        in place while the others' autograd graphs still held them (issue 24, item 1)."""
        if self.built:
            return
        replica = context.current_replica_context()
        if replica is not None and not self._made_in_replica:
            shape = _shape_of(inputs)   # the last replica to arrive builds with its shape (batch sizes may differ)
            replica.merge_call(lambda strategy, layer: layer._build_once(shape), args=(self,))
            return
        self._build_once(_shape_of(inputs))

    def _build_once(self, shape):
        with _BUILD_LOCK:          # threads may make the first call concurrently: build once
            if self.built:
                return
            with weight_paths.layer_scope(self):
                self.build(shape)
            self._build_input_shape = shape
            self.built = True

    def _check_input(self, inputs):
        if self.input_spec is None:
            return
        if type(self.input_spec) is InputSpec and isinstance(inputs, torch.Tensor):
            self.input_spec.check(self.name, inputs.shape, 0)
            return
        specs = self.input_spec if isinstance(self.input_spec, (list, tuple)) else [self.input_spec]
        flat = kt.flatten(inputs)
        for i, (spec, x) in enumerate(zip(specs, flat)):
            if spec is not None and hasattr(x, "shape"):
                spec.check(self.name, x.shape, i)

    def __call__(self, *args, **kwargs):
        inputs = call_inputs.split_inputs(self, args, kwargs)   # call(self, x) may get x=...
        mask = kwargs.get("mask", layer_losses.mask_of(inputs))    # before a dtype cast makes a new tensor
        if type(inputs) is not torch.Tensor:          # fast path: a plain tensor is never symbolic
            if kt.is_symbolic(inputs):
                return kt.call_symbolic(self, inputs, {**self._named_extra_args(args[1:]), **kwargs})
            inputs = self._convert_inputs(inputs)
        elif inputs.is_floating_point() and not self._dtype_policy.is_mixed and inputs.dtype != self._compute_torch_dtype:
            inputs = inputs.to(self._compute_torch_dtype)
        first = not self.built     # the call that builds makes the weights of the layers it calls: named under it
        if first:
            self._check_input(inputs)      # rank checks before build (build would fail less clearly)
            self._maybe_build(inputs)
        self._check_input(inputs)
        training = kwargs.pop("training", None)
        outer, depth = _call_state.get()
        if training is None:
            training = outer
        if self._call_accepts_training():
            kwargs["training"] = bool(training)
        if mask is not None and "mask" not in kwargs and self._call_accepts("mask"):
            kwargs["mask"] = mask
        placed = _NO_SCOPE
        if depth == 0:
            layer_losses.clear_call_losses(self)
            inputs, args, kwargs, placed = weights_device.place_call(self, inputs, args, kwargs)
        token = _call_state.set((training, depth + 1))
        try:
            with placed, self._dtype_policy.autocast(weights_device.device_type(inputs)), \
                    weight_paths.layer_scope(self) if first else _NO_SCOPE:
                outputs = super().__call__(inputs, *args[1:], **kwargs)
        finally:
            _call_state.reset(token)
        if depth == 0:       # what the program gets: `.numpy()` reads it, as TensorFlow's eager tensors
            outputs = _readable_outputs(outputs)
        if self.activity_regularizer is not None:
            layer_losses.record_activity(self, outputs)
        out_mask = self.compute_mask(inputs, mask)
        if out_mask is not None:
            layer_losses.attach_mask(outputs, out_mask)
        if kt.inferring():   # run on zeros inside a symbolic call: a dim the dummy sizes change is unknown
            if self._output_shape is None or self.__dict__.get("_shape_from_zeros"):
                self._record_output_shape(outputs, merge=self.__dict__.get("_shape_from_zeros", False))
                self._shape_from_zeros = True
        elif self._output_shape is None:
            self._record_output_shape(outputs)
        return outputs

    def _convert_inputs(self, inputs):
        """numpy -> tensor, floats cast to a non-mixed policy's dtype (Keras autocasting); text left for its layers."""
        if isinstance(inputs, np.ndarray) and inputs.dtype.kind in "USO":
            return host_inputs.text_input(self, inputs)
        if isinstance(inputs, np.ndarray) or _python_numbers(inputs):   # tf.keras: `layer([[2.0, 2.0, 2.0]])`
            inputs = torch.from_numpy(np.asarray(inputs))
        if self._dtype_policy.is_mixed:
            return inputs
        target = self._compute_torch_dtype
        return kt.map_structure(
            lambda t: t.to(target) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != target else t,
            inputs)

    @property
    def _compute_torch_dtype(self):
        return self._dtype_policy.torch_compute_dtype

    def _record_output_shape(self, outputs, merge=False):
        """``output_shape`` from a call's outputs; ``merge``: None where it differs from the shape recorded before
        (two runs on zeros of different unknown lengths: a nested layer's dims that follow them)."""
        def shape(o):
            return (None,) + tuple(o.shape[1:]) if len(o.shape) else tuple(o.shape)
        flat = kt.flatten(outputs)
        new = shape(flat[0]) if len(flat) == 1 else [shape(o) for o in flat]
        self._output_shape = kt.merged_shape(self._output_shape, new) if merge else new

    # ----- introspection ---------------------------------------------------------------------
    @property
    def output_shape(self):
        if self._output_shape is None:
            raise AttributeError(f'The layer "{self.name}" has never been called and thus has no defined output shape.')
        return self._output_shape

    @property
    def input(self):
        """The input KerasTensor(s) of this layer's first symbolic call (Keras's ``layer.input``)."""
        return self._first_node("input_tensors", "input")

    @property
    def output(self):
        """The output KerasTensor(s) of this layer's first symbolic call (Keras's ``layer.output``)."""
        return self._first_node("outputs", "output")

    def _first_node(self, attr, what):
        if not self._inbound_nodes:
            raise AttributeError(f"The layer {self.name} has never been called and thus has no defined {what}.")
        values = getattr(self._inbound_nodes[0], attr)
        return values[0] if len(values) == 1 else list(values)

    @property
    def dtype(self) -> str:
        return self._dtype_policy.variable_dtype

    @property
    def compute_dtype(self) -> str:
        return self._dtype_policy.compute_dtype

    @property
    def dtype_policy(self):
        return self._dtype_policy

    def get_config(self) -> dict:
        """Constructor arguments that rebuild this layer (subclasses extend it)."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": self._dtype_policy.name}
        if self.activity_regularizer is not None:
            config["activity_regularizer"] = regularizers.serialize(self.activity_regularizer)
        if self._batch_input_shape is not None:
            config["batch_input_shape"] = list(self._batch_input_shape)
        return config

    @classmethod
    def from_config(cls, config: dict):
        """Rebuild a layer from ``get_config()`` output."""
        return cls(**config)

    def extra_repr(self) -> str:
        return f"name={self.name!r}"
