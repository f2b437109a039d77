"""Layer: a ``torch.nn.Module`` with Keras's lifecycle (lazy build, names, weights, trainable).

Weights made by ``add_weight`` are registered ``nn.Parameter``s (trainable) or buffers
(non-trainable) and are always read back through ``nn.Module`` attribute lookup, so a strategy
can make ``_parameters`` replica-aware. Keras semantics for ``training``: a direct call runs in
inference mode unless ``training=True`` is passed (``nn.Module.training`` is not consulted).

Example:
    class Scale(md.keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", shape=(input_shape[-1],), initializer="ones")
        def call(self, x):
            return x * self.w
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading

import numpy as np
import torch
from torch import nn

from multidev.keras import backend, initializers, mixed_precision, regularizers
from multidev.keras.layers import keras_tensor as kt
from multidev.keras.layers import layer_losses
from multidev.keras.layers.input_spec import InputSpec
from multidev.values import context
from multidev.values.variables import DistributedVariable

# (training flag, depth) of the innermost enclosing layer call here; each thread starts outside every call.
_call_state: contextvars.ContextVar[tuple] = contextvars.ContextVar("multidev_layer_call", default=(None, 0))
_BUILD_LOCK = threading.RLock()
_SIG_CACHE: dict[tuple[type, str], bool] = {}


def current_training():
    """The ``training`` flag of the innermost enclosing layer call in this thread (or None)."""
    return _call_state.get()[0]


class KerasParameter(nn.Parameter):
    """A trainable weight outside a strategy: a plain parameter with Keras 3's ``value`` (itself), so a
    torch-style ``train_step``'s ``[v.value.grad for v in self.trainable_weights]`` runs (in a
    strategy's scope the weight becomes a distributed variable, whose ``value`` does the same)."""

    @property
    def value(self) -> "KerasParameter":
        return self


def _module_weights(module: nn.Module, trainable: bool):
    """``(weight, is_trainable)`` of a sub-module: a Layer's own listing, else the module's parameters
    (trainable with its parent) and buffers, then its children's (a Layer among them counts its flag)."""
    if isinstance(module, Layer):
        yield from module._all_weights(trainable)
        return
    for p in dict.values(module._parameters):
        if p is not None:
            yield p, trainable
    for b in dict.values(module._buffers):
        if b is not None:
            yield b, False
    for child in module._modules.values():
        if child is not None:
            yield from _module_weights(child, trainable)


def _shape_of(x):
    if isinstance(x, (list, tuple)):
        return [_shape_of(i) for i in x]
    if isinstance(x, dict):
        return {k: _shape_of(v) for k, v in x.items()}
    return tuple(x.shape)


class Layer(nn.Module):
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
        super().__init__()
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

    def _call_accepts_training(self) -> bool:
        return self._call_accepts("training")

    def compute_mask(self, inputs, mask=None):
        """The mask of this layer's output: the input's if ``supports_masking``, else None (override)."""
        return mask if self.supports_masking else None

    def add_loss(self, loss):
        """Add a loss to this call (e.g. an activity penalty); ``model.losses`` lists it, ``fit`` adds it."""
        layer_losses.add_call_loss(self, loss)

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
        inputs = args[0] if args else kwargs.pop("inputs")
        mask = kwargs.get("mask", layer_losses.mask_of(inputs))    # before a dtype cast makes a new tensor
        if type(inputs) is not torch.Tensor:          # fast path: a plain tensor is never symbolic
            if kt.is_symbolic(inputs):
                return kt.call_symbolic(self, inputs, kwargs)
            inputs = self._convert_inputs(inputs)
        elif inputs.is_floating_point() and not self._dtype_policy.is_mixed and inputs.dtype != self._compute_torch_dtype:
            inputs = inputs.to(self._compute_torch_dtype)
        if not self.built:
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
        if depth == 0:
            layer_losses.clear_call_losses(self)
        token = _call_state.set((training, depth + 1))
        try:
            with self._dtype_policy.autocast(self._device_type(inputs)):
                outputs = super().__call__(inputs, *args[1:], **kwargs)
        finally:
            _call_state.reset(token)
        if self.activity_regularizer is not None:
            layer_losses.record_activity(self, outputs)
        out_mask = self.compute_mask(inputs, mask)
        if out_mask is not None:
            layer_losses.attach_mask(outputs, out_mask)
        if self._output_shape is None:
            self._record_output_shape(outputs)
        return outputs

    def _convert_inputs(self, inputs):
        """numpy -> tensor, and floating inputs cast to a non-mixed policy's dtype (Keras autocasting)."""
        if isinstance(inputs, np.ndarray):
            inputs = torch.from_numpy(inputs)
        if self._dtype_policy.is_mixed:
            return inputs
        target = self._compute_torch_dtype
        return kt.map_structure(
            lambda t: t.to(target) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != target else t,
            inputs)

    @property
    def _compute_torch_dtype(self):
        return self._dtype_policy.torch_compute_dtype

    @staticmethod
    def _device_type(inputs) -> str:
        leaf = kt.flatten(inputs)[0]
        return leaf.device.type if isinstance(leaf, torch.Tensor) else "cpu"

    def _record_output_shape(self, outputs):
        def shape(o):
            return (None,) + tuple(o.shape[1:]) if len(o.shape) else tuple(o.shape)
        flat = kt.flatten(outputs)
        self._output_shape = shape(flat[0]) if len(flat) == 1 else [shape(o) for o in flat]

    # ----- weights ---------------------------------------------------------------------------
    def add_weight(self, name=None, shape=(), initializer="glorot_uniform", trainable=True, dtype=None,
                   regularizer=None, **_):
        """Create, register and return a weight (trainable: ``nn.Parameter``; else a buffer).

        Keras 2's ``add_weight(name, shape, ...)`` and Keras 3's ``add_weight(shape=..., initializer=...)``
        (shape first, name optional: 'variable', 'variable_1', ...) both work.
        ``regularizer`` (a trainable weight's penalty) is evaluated on the weight whenever ``losses`` is read."""
        if name is not None and not isinstance(name, str):  # Keras 3: the shape given first, positionally
            name, shape = None, name
        if initializer is None:
            initializer = "glorot_uniform"
        if name is None:
            taken = {n for n, _ in self._weight_specs}
            name = next(n for n in ("variable", *(f"variable_{i}" for i in range(1, len(taken) + 2)))
                        if n not in taken and n not in self.__dict__ and n not in self._modules)
        regularizer = regularizers.get(regularizer)
        if regularizer is not None and trainable:
            self._weight_regularizers.append((name, regularizer))
        dt = backend.as_dtype(dtype or self._dtype_policy.variable_dtype)
        value = initializers.get(initializer)(tuple(int(s) for s in shape), dt)
        if trainable:
            self.register_parameter(name, KerasParameter(value, requires_grad=self.trainable))
        else:
            self.register_buffer(name, value)
        self._weight_specs.append((name, bool(trainable)))
        return getattr(self, name)

    def _all_weights(self, parent_trainable=True):
        """Yield ``(weight, is_trainable)`` for this layer's weights, then its sub-modules'.

        A weight is the registered object itself: inside ``strategy.run`` a distributed variable
        stays the variable (Keras lists variables, never a replica's copy, so an optimizer built
        from ``trainable_variables`` in a replica sums across replicas). Layers inside torch
        containers (``nn.ModuleList``: Sequential's and functional models' layers, lists of layers
        in subclassed models) keep their own ``trainable`` flag."""
        eff = parent_trainable and self._trainable
        for attr, trainable in self._weight_specs:
            yield self._registered_weight(attr), trainable and eff
        for child in self._modules.values():
            if child is not None:
                yield from _module_weights(child, eff)

    def _registered_weight(self, attr: str):
        # dict.get reads the stored value: a replica-aware dict's [] would give a replica's copy.
        for store in (self._parameters, self._buffers):
            value = dict.get(store, attr)
            if value is not None:
                return value
        return getattr(self, attr)   # a weight kept outside torch's dicts (e.g. a sharded variable)

    def _unique(self, trainable_flag):
        seen, out = set(), []
        for w, t in self._all_weights():
            if t == trainable_flag and id(w) not in seen:
                seen.add(id(w))
                out.append(w)
        return out

    @property
    def trainable_weights(self) -> list:
        return self._unique(True)

    @property
    def non_trainable_weights(self) -> list:
        return self._unique(False)

    @property
    def weights(self) -> list:
        """Trainable then non-trainable weights (Keras order); a variable split into shards by a
        ParameterServerStrategy partitioner is listed shard by shard, as in TF."""
        seen, out = set(), []
        for w in self.trainable_weights + self.non_trainable_weights:
            if id(w) not in seen:
                seen.add(id(w))
                out += w.variables if getattr(type(w), "_lists_shards", False) else [w]
        return out

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool):
        """Set the flag of this layer and of every layer inside it, as Keras does: a frozen model's
        BatchNormalization then runs in inference mode (its moving statistics stay)."""
        layers = list(self._sublayers_and_self())
        for layer in layers:
            layer._trainable = bool(value)
        for layer in layers:
            layer._refresh_requires_grad()

    def _sublayers_and_self(self):
        yield self
        for m in self.modules():
            if isinstance(m, Layer) and m is not self:
                yield m

    def _refresh_requires_grad(self):
        """Frozen weights stop requiring gradients: autograd skips them, and a torch-style step
        (``loss.backward()``) leaves their ``.grad`` None. A distributed variable's replica copies
        follow it (they are what each replica differentiates)."""
        trainable = {id(w) for w in self.trainable_weights}
        for p in self.parameters():
            flag = id(p) in trainable
            p.requires_grad_(flag)
            for copy in p.values if isinstance(p, DistributedVariable) else ():
                copy.requires_grad_(flag)

    def get_weights(self) -> list:
        """Weights as numpy arrays, in ``weights`` order."""
        return [np.array((w.detach().float() if w.dtype == torch.bfloat16 else w.detach()).cpu().numpy(), copy=True)
                for w in self.weights]

    def set_weights(self, weights) -> None:
        """Assign numpy arrays to ``weights`` (same count and shapes, else ValueError listing all)."""
        own = self.weights
        weights = list(weights)
        if len(weights) != len(own):
            raise ValueError(
                f'Layer "{self.name}" expects {len(own)} weight(s), but the weights list has {len(weights)}. '
                f"Expected shapes: {[tuple(w.shape) for w in own]}."
            )
        bad = [(i, tuple(w.shape), tuple(np.shape(v))) for i, (w, v) in enumerate(zip(own, weights))
               if tuple(w.shape) != tuple(np.shape(v))]
        if bad:
            lines = "; ".join(f"weight {i}: expected {e}, received {r}" for i, e, r in bad)
            raise ValueError(f'Layer "{self.name}": weight shape mismatch ({lines}). No weight was changed.')
        for w, v in zip(own, weights):   # every replica's copy of a distributed variable
            backend.set_value(w, np.asarray(v))

    def count_params(self) -> int:
        """Number of scalars in all weights (the layer must be built)."""
        if not self.built:
            raise ValueError(
                f"You tried to call `count_params` on layer '{self.name}', but the layer isn't built. "
                "Build it first by calling it on data or with `build(input_shape)`."
            )
        return int(sum(w.numel() for w in self.weights))

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
