"""A Keras layer's weights: ``add_weight``, the ``weights`` / ``trainable_weights`` listings, the
``trainable`` flag, ``get_weights`` / ``set_weights`` and ``count_params``.

``LayerWeights`` is a mixin of ``Layer`` (``base.py``) and of nothing else, so ``isinstance(m,
LayerWeights)`` means "a Layer". It is separate from ``base.py`` because what a layer owns and lists
(registered parameters and buffers, read back through ``nn.Module``'s dicts so a strategy can make
them replica-aware) is independent of how it is called (building, ``training``, masks, autocast).
Import ``Layer`` and ``KerasParameter`` from ``multidev.keras.layers.base``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import nn

from multidev._core.eager_tensor import readable
from multidev.keras import backend, initializers, regularizers
from multidev.keras.layers import layer_losses, layer_state, weight_paths
from multidev.values.variables import DistributedVariable


class KerasParameter(nn.Parameter):
    """A trainable weight outside a strategy: a plain parameter with Keras 3's ``value`` (itself), so a
    torch-style ``train_step``'s ``[v.value.grad for v in self.trainable_weights]`` runs (in a
    strategy's scope the weight becomes a distributed variable, whose ``value`` does the same), and
    the variable API that TensorFlow programs call on a layer's weight (``layer.kernel.assign(...)``,
    ``v.numpy()``, ``assign_add``/``assign_sub``, ``read_value``) as ``md.Variable`` has it."""

    @property
    def value(self) -> "KerasParameter":
        return self

    @property
    def name(self) -> str | None:
        """Keras 3's ``variable.name``: the name given to ``add_weight`` ('kernel', 'moving_variance'), so a
        program's ``"variance" in w.name`` runs on one device too (torch's ``Tensor.name`` is None)."""
        return self.__dict__.get("_keras_name")

    @property
    def path(self) -> str | None:
        """Keras 3's ``variable.path``: the layers that made it and its name (``'sequential/dense/kernel'``)."""
        return self.__dict__.get("_keras_path") or self.name

    @property
    def trainable(self) -> bool:
        """Keras 3's ``variable.trainable``: whether the optimizer updates it (``requires_grad`` here)."""
        return self.requires_grad

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self.requires_grad_(bool(value))

    def __deepcopy__(self, memo):
        """torch's copy of a Parameter, keeping Keras's ``name`` and ``path`` (torch's drops the instance's attributes)."""
        copied = super().__deepcopy__(memo)
        _copy_keras_names(self, copied)
        return copied

    def numpy(self) -> np.ndarray:
        return self.detach().cpu().numpy().copy()   # a snapshot, as TensorFlow's numpy() is

    def __getitem__(self, index):
        """A slice that reads as TensorFlow's does: the time_series tutorial plots
        ``linear.layers[0].kernel[:,0].numpy()`` (torch refuses numpy() on a tensor that requires grad)."""
        return readable(torch.Tensor.__getitem__(self, index))

    def read_value(self) -> torch.Tensor:
        return self.detach().clone()

    def assign(self, value, use_locking=None, name=None, read_value=True) -> "KerasParameter":
        return self._update(torch.Tensor.copy_, value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True) -> "KerasParameter":
        return self._update(torch.Tensor.add_, delta)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True) -> "KerasParameter":
        return self._update(torch.Tensor.sub_, delta)

    def _update(self, op, value) -> "KerasParameter":
        """Write in place (no autograd record), refusing a value that does not broadcast to the shape."""
        with torch.no_grad():
            tensor = value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
            tensor = tensor.to(dtype=self.dtype, device=self.device)
            try:
                broadcast = torch.broadcast_shapes(tensor.shape, self.shape)
            except RuntimeError:   # torch's "cannot broadcast": TF's is a ValueError naming both shapes
                broadcast = None
            if broadcast != self.shape:
                raise ValueError(f"Cannot assign a value of shape {tuple(tensor.shape)} to a weight of shape "
                                 f"{tuple(self.shape)}; pass a value of the weight's shape.")
            op(self, tensor)
        return self


class KerasBuffer(torch.Tensor):
    """A non-trainable weight outside a strategy: a buffer with the variable API of ``KerasParameter``
    (``assign_add`` in ``call``, as the guides' ``ComputeSum`` does; ``numpy``, ``value``). Results of
    ops on it are plain tensors (torch function dispatch is off, as ``nn.Parameter``'s)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data, False)

    def __reduce_ex__(self, proto):
        return torch.Tensor.__reduce_ex__(self.as_subclass(torch.Tensor), proto)

    def __deepcopy__(self, memo):
        """A new buffer with a copy of the value and Keras's ``name`` (torch's default needs ``new_empty``)."""
        if id(self) not in memo:
            copied = memo[id(self)] = KerasBuffer(self.detach().clone())
            _copy_keras_names(self, copied)
        return memo[id(self)]

    @property
    def trainable(self) -> bool:
        """Keras 3's ``variable.trainable``: a non-trainable weight (a buffer) is never trained."""
        return False

    value = KerasParameter.value
    name = KerasParameter.name
    path = KerasParameter.path
    numpy = KerasParameter.numpy
    read_value = KerasParameter.read_value
    assign = KerasParameter.assign
    assign_add = KerasParameter.assign_add
    assign_sub = KerasParameter.assign_sub
    _update = KerasParameter._update


def _copy_keras_names(source, copy) -> None:
    """Keras's ``name`` and ``path`` of ``source`` onto its ``copy`` (``copy.deepcopy``, ``clone_model``)."""
    for attr in ("_keras_name", "_keras_path"):
        if attr in source.__dict__:
            setattr(copy, attr, source.__dict__[attr])


def _module_weights(module: nn.Module, trainable: bool):
    """``(weight, is_trainable)`` of a sub-module: a Layer's own listing, else the module's parameters
    (trainable with its parent) and buffers, then its children's (a Layer among them counts its flag)."""
    if isinstance(module, LayerWeights):
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


def _set_aggregation(weight, aggregation) -> None:
    """A trainable weight made distributed by the scope takes the ``add_weight`` aggregation (NONE unless
    given), as TensorFlow's Keras weights: an assign in a replica writes that replica's copy (keras.io's
    mean teacher moves each teacher weight towards the student's in its ``train_step``: every replica computes
    the same value for its copy; SUM, the aggregation of a plain module parameter, added the replicas' values)."""
    if isinstance(weight, DistributedVariable):
        weight.aggregation = aggregation
        weight._agree_despite_none = True   # a torch in-place write leaving the copies apart still raises
        from multidev.keras.layers import replica_weights   # (it imports this module)
        replica_weights.assignable_copies(weight)   # PixelCNN's kernel.assign in a replica's call


class LayerWeights:
    """The weight half of ``Layer``: expects ``nn.Module``'s registration API and the attributes that
    ``Layer.__init__`` sets (``_weight_specs``, ``_weight_regularizers``, ``_trainable``, ``_dtype_policy``)."""

    def __setstate__(self, state):
        """Unpickled (a scheduled function's model on a parameter-server worker) or deep-copied: a layer with weight
        penalties makes ``losses`` walk the layers in this process too (``layer_losses.note_weight_penalty``)."""
        super().__setstate__(state)
        if state.get("_weight_regularizers"):
            layer_losses.note_weight_penalty()

    def add_weight(self, name=None, shape=(), initializer="glorot_uniform", trainable=None, dtype=None,
                   regularizer=None, synchronization=None, aggregation=None, **_):
        """Create, register and return a weight (trainable: ``nn.Parameter``; else a buffer).

        Keras 2's ``add_weight(name, shape, ...)`` and Keras 3's ``add_weight(shape=..., initializer=...)``
        (shape first, name optional: 'variable', 'variable_1', ...) both work.
        ``regularizer`` (a trainable weight's penalty) is evaluated on the weight whenever ``losses`` is read.
        ``synchronization``/``aggregation`` (TensorFlow's enums or Keras 3's strings) decide what a state
        weight written in ``call`` holds on a strategy's replicas (``layer_state.py``)."""
        if name is not None and not isinstance(name, str):  # Keras 3: the shape given first, positionally
            name, shape = None, name
        if initializer is None:
            initializer = "glorot_uniform"
        if name is None:
            taken = {n for n, _ in self._weight_specs}
            name = next(n for n in ("variable", *(f"variable_{i}" for i in range(1, len(taken) + 2)))
                        if n not in taken and n not in self.__dict__ and n not in self._modules)
        trainable, synchronization, aggregation = layer_state.resolve_policy(name, trainable, synchronization,
                                                                            aggregation)
        regularizer = regularizers.get(regularizer)
        if regularizer is not None and trainable:
            self._weight_regularizers.append((name, regularizer))
            layer_losses.note_weight_penalty()
        dt = backend.as_dtype(dtype or self._dtype_policy.variable_dtype)
        value = initializers.get(initializer)(tuple(int(s) for s in shape), dt)
        if trainable:
            parameter = KerasParameter(value, requires_grad=self.trainable)
            self.register_parameter(name, parameter)
            _set_aggregation(getattr(self, name), aggregation)
        else:
            layer_state.register_state(self, name, value, KerasBuffer, synchronization, aggregation)
        _name_weight(getattr(self, name), name, weight_paths.path_for(self, name))
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
        specs = self._weight_specs + self._variable_attributes()
        for attr, trainable in sorted(specs, key=lambda spec: not spec[1]):  # stable: Keras 3 order
            yield self._registered_weight(attr), trainable and eff
        for child in self._modules.values():
            if child is not None:
                yield from _module_weights(child, eff)

    def _variable_attributes(self) -> list[tuple[str, bool]]:
        """``(name, trainable)`` of variables assigned as attributes (``self.w = md.Variable(5.0)``, the
        basic_training_loops guide's Keras model), which tf.keras tracks as weights as it does
        ``add_weight``'s: without them ``fit`` would train nothing, silently."""
        named = {name for name, _ in self._weight_specs}
        known = {id(dict.get(self._parameters, name)) for name in named}   # `self.w2 = self.kernel`: an alias
        out = []
        for name, p in dict.items(self._parameters):
            if p is not None and name not in named and id(p) not in known:
                known.add(id(p))
                out.append((name, bool(getattr(p, "trainable", p.requires_grad))))
        return out

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
        """Every weight in Keras 3's order: layer by layer, each layer's own weights (those made
        trainable first, in creation order) before its sub-layers', whatever ``trainable`` flags say
        (tf.keras 2 listed all trainable weights first: freezing a layer reordered ``get_weights()``);
        a variable split into shards by a ParameterServerStrategy partitioner is listed shard by shard, as in TF."""
        seen, out = set(), []
        for w, _ in self._all_weights():
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
            if isinstance(m, LayerWeights) and m is not self:
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
        if not isinstance(weights, Iterable) or isinstance(weights, (str, bytes, dict)):
            raise TypeError(f'Layer "{self.name}": set_weights expects a list of {len(own)} numpy arrays (as '
                            f"get_weights returns). Received: weights={weights!r} (type {type(weights).__name__}).")
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
        arrays = [np.asarray(v) for v in weights]
        bad = [(i, a.dtype) for i, a in enumerate(arrays) if a.dtype.kind not in "biufc"]
        if bad:   # checked before any assignment: a failure half-way would leave some weights changed
            lines = "; ".join(f"weight {i} has dtype {d}" for i, d in bad)
            raise TypeError(f'Layer "{self.name}": set_weights expects numeric arrays ({lines}). No weight was changed.')
        for w, v in zip(own, arrays):   # every replica's copy of a distributed variable
            backend.set_value(w, v)

    def count_params(self) -> int:
        """Number of scalars in all weights (the layer must be built)."""
        if not self.built:
            raise ValueError(
                f"You tried to call `count_params` on layer '{self.name}', but the layer isn't built. "
                "Build it first by calling it on data or with `build(input_shape)`."
            )
        return int(sum(w.numel() for w in self.weights))


def _name_weight(weight, name: str, path: str) -> None:
    """Give ``weight`` Keras 3's ``name`` (``'kernel'``) and ``path`` (``'dense/kernel'``): the registered
    object, which under a strategy's scope is the distributed variable made from the layer's tensor (TF's
    ``'Dense.kernel:0'`` otherwise)."""
    if isinstance(weight, torch.Tensor):
        weight._keras_name = name
        weight._keras_path = path
