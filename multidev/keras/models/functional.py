"""Functional models: a graph of layer calls from ``layers.Input`` tensors to outputs.

Example:
    inputs = md.keras.layers.Input(shape=(16,))
    x = md.keras.layers.Dense(32, activation="relu")(inputs)
    outputs = md.keras.layers.Dense(1)(x)
    model = md.keras.Model(inputs=inputs, outputs=outputs)
"""

from __future__ import annotations

from torch import nn

from multidev.keras import backend
from multidev.keras.layers.input_layer import InputLayer
from multidev.keras.layers.keras_tensor import KerasTensor, flatten, map_structure
from multidev.keras.layers.symbolic_ops import OpLayer
from multidev.keras.models import input_dtypes, input_rank
from multidev.keras.models.model import Model

KWARG_TENSOR = "__keras_tensor__"   # a call's keyword argument that is a tensor of the graph: {KWARG_TENSOR: key}


def _toposort(outputs) -> list:
    """Nodes needed to compute ``outputs``, each after the nodes producing its inputs."""
    order, seen = [], set()

    def visit(kt):
        layer, node_index, _ = kt._keras_history
        node = layer._inbound_nodes[node_index]
        if id(node) in seen:
            return
        seen.add(id(node))
        for t in node.input_tensors:
            visit(t)
        order.append(node)

    for kt in flatten(outputs):
        visit(kt)
    return order


def _parents(node) -> list:
    return [kt._keras_history[0]._inbound_nodes[kt._keras_history[1]] for kt in node.input_tensors]


def _keras_layer_order(inputs, outputs, nodes) -> list:
    """Layers sorted by (-depth, first-visit index), as Keras 3's ``map_graph`` sorts operations."""
    index: dict = {}

    def visit(kt, seen):
        layer, node_index, _ = kt._keras_history
        node = layer._inbound_nodes[node_index]
        if id(node) in seen:
            return
        seen.add(id(node))
        index.setdefault(id(layer), len(index))
        for t in node.input_tensors:
            visit(t, seen)

    seen: set = set()
    for kt in flatten(outputs):
        visit(kt, seen)
    in_graph = {id(n) for n in nodes}
    node_depth: dict = {}
    layer_depth: dict = {}
    layers: dict = {}
    for node in reversed(nodes):
        depth = max(node_depth.setdefault(id(node), 0), layer_depth.get(id(node.layer), 0))
        layer_depth[id(node.layer)], node_depth[id(node)] = depth, depth
        layers[id(node.layer)] = node.layer
        for parent in _parents(node):
            if id(parent) in in_graph:
                node_depth[id(parent)] = max(depth + 1, node_depth.get(id(parent), 0))
    for kt in flatten(inputs):   # an input no output depends on
        layer = kt._keras_history[0]
        if id(layer) not in layer_depth:
            layer_depth[id(layer)], index[id(layer)], layers[id(layer)] = 0, -1, layer
    return sorted(layers.values(), key=lambda l: (-layer_depth[id(l)], index[id(l)]))


class Functional(Model):
    """A Model defined by ``inputs`` and ``outputs`` KerasTensors (one or several of each)."""

    def __init__(self, inputs, outputs, name=None, trainable=True, **kwargs):
        super().__init__(name=name or backend.unique_name("model"), trainable=trainable, **kwargs)
        self._validate(inputs, outputs)
        self._inputs, self._outputs = inputs, outputs
        self._nodes = _toposort(outputs)
        self._check_connected()
        self._modules["layers"] = nn.ModuleList(self._ordered_layers())
        self.built = True

    @staticmethod
    def _validate(inputs, outputs):
        for kt in flatten(inputs):
            if not isinstance(kt, KerasTensor) or not isinstance(kt._keras_history[0], InputLayer):
                raise ValueError(f"Model inputs must come from `keras.Input` (thus holding past layer metadata). "
                                 f"Received: inputs={kt!r}")
        for kt in flatten(outputs):
            if not isinstance(kt, KerasTensor):
                raise ValueError(f"Output tensors of a Functional model must be the output of a layer. Received: {kt!r}")

    def _check_connected(self):
        available = {id(kt) for kt in flatten(self._inputs)}
        for node in self._nodes:
            if isinstance(node.layer, InputLayer):
                if id(node.outputs[0]) not in available:
                    raise ValueError(f"Graph disconnected: cannot obtain value for tensor {node.outputs[0]!r} at layer "
                                     f'"{node.layer.name}". Add it to the model inputs.')
                continue
            available.update(id(t) for t in node.outputs)

    def _ordered_layers(self) -> list:
        """The input layers (in the model's input order), then the other layers in Keras's order
        (``map_graph``: by depth from the outputs, deepest first; a tie by first visit of the
        depth-first walk from the outputs), so ``weights``/``get_weights`` list as Keras does.
        (Keras may interleave an input layer later, e.g. one feeding a Concatenate directly; input
        layers have no weights, so only ``layers`` indices can differ from Keras's.)"""
        inputs = [kt._keras_history[0] for kt in flatten(self._inputs)]
        rest = [l for l in _keras_layer_order(self._inputs, self._outputs, self._nodes)
                if not any(l is i for i in inputs)]
        return inputs + rest

    @property
    def layers(self) -> list:
        """The layers, without Keras 3's op nodes (``x + y``, ``ops.mean``: symbolic_ops); tf.keras 2's
        ``TFOpLambda`` nodes (``md.concat``) are layers, as there."""
        return [l for l in self._modules["layers"] if not isinstance(l, OpLayer) or l.listed]

    def _summary_layers(self) -> list:
        """Every node's layer, op nodes included (``model.summary()`` lists them, as Keras 3's)."""
        return list(self._modules["layers"])

    @property
    def inputs(self) -> list:
        return flatten(self._inputs)

    @property
    def outputs(self) -> list:
        return flatten(self._outputs)

    @property
    def input_shape(self):
        shapes = [kt.shape for kt in self.inputs]
        return shapes[0] if len(shapes) == 1 else shapes

    @property
    def output_shape(self):
        """The graph's output shapes (None for unknown dims, as tf.keras 2's nodes give them), not the last batch's."""
        shapes = [tuple(kt.shape) for kt in self.outputs]
        return shapes[0] if len(shapes) == 1 else shapes

    def _output_names(self) -> list:
        if isinstance(self._outputs, dict):
            return sorted(self._outputs)
        return [kt._keras_history[0].name for kt in flatten(self._outputs)]

    def _maybe_build(self, inputs):
        self.built = True

    def _check_input(self, inputs):
        expected = flatten(self._inputs)
        got = self._flatten_inputs(inputs)
        if len(got) != len(expected):
            raise ValueError(f'Layer "{self.name}" expects {len(expected)} input(s), but it received {len(got)} input tensors.')
        for i, (kt, value) in enumerate(zip(expected, got)):
            shape = tuple(getattr(input_rank.adjust(value, kt.shape), "shape", ()))
            if len(shape) != len(kt.shape) or any(e is not None and e != g for e, g in zip(kt.shape[1:], shape[1:])):
                raise ValueError(f'Input {i} of layer "{self.name}" is incompatible with the layer: expected '
                                 f"shape={kt.shape}, found shape={shape}")

    def _flatten_inputs(self, inputs) -> list:
        if isinstance(self._inputs, dict) and isinstance(inputs, dict):
            missing = sorted(set(self._inputs) - set(inputs))
            if missing:
                raise ValueError(f"Missing data for input(s) {missing}. Expected keys: {sorted(self._inputs)}.")
            return [inputs[k] for k in sorted(self._inputs)]
        if isinstance(inputs, dict):
            names = [kt._keras_history[0].name for kt in flatten(self._inputs)]
            return [inputs[n] for n in names]
        return list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]

    def call(self, inputs, training=None):
        values = {id(kt): input_rank.adjust(input_dtypes.conform(v, kt.dtype), kt.shape)
                  for kt, v in zip(flatten(self._inputs), self._flatten_inputs(inputs))}
        for node in self._nodes:
            if isinstance(node.layer, InputLayer):
                continue
            args = map_structure(lambda t: values[id(t)], node.inputs)
            kwargs = map_structure(lambda t: values[id(t)] if isinstance(t, KerasTensor) else t, node.kwargs)
            out = node.layer(args, **kwargs)
            for kt, v in zip(node.outputs, flatten(out)):
                values[id(kt)] = v
        return map_structure(lambda t: values[id(t)], self._outputs)

    # ----- config -------------------------------------------------------------------------------
    def _node_key(self, kt):
        layer, node_index, tensor_index = kt._keras_history
        local = [n for n in layer._inbound_nodes if any(n is m for m in self._nodes)]
        node = layer._inbound_nodes[node_index]
        return [layer.name, next(i for i, n in enumerate(local) if n is node), tensor_index]

    def _kwarg_ref(self, value):
        """A tensor among a call's keyword arguments (keras.io's seq2seq decoder ``LSTM(...)(x, initial_state=
        encoder_states)``) as a reference to the call that made it; anything else as it is."""
        return {KWARG_TENSOR: self._node_key(value)} if isinstance(value, KerasTensor) else value

    def get_config(self) -> dict:
        """JSON-able graph: each layer's config and the calls (``inbound_nodes``) that feed it."""
        from multidev.keras.saving.serialization import serialize_layer
        layers = []
        for layer in self._summary_layers():
            nodes = [n for n in self._nodes if n.layer is layer and not isinstance(layer, InputLayer)]
            layers.append({**serialize_layer(layer), "name": layer.name,
                           "inbound_nodes": [{"args": map_structure(self._node_key, n.inputs), "kwargs": map_structure(self._kwarg_ref, n.kwargs)}
                                             for n in nodes]})
        return {"name": self.name, "layers": layers,
                "input_layers": map_structure(self._node_key, self._inputs),
                "output_layers": map_structure(self._node_key, self._outputs)}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from multidev.keras.saving.functional_config import rebuild
        inputs, outputs = rebuild(config, custom_objects)
        return cls(inputs=inputs, outputs=outputs, name=config.get("name"))
