"""Sequential: a plain stack of layers, each with one input and one output.

Example:
    model = md.keras.models.Sequential([
        md.keras.layers.Embedding(30982, 7, input_length=300),
        md.keras.layers.Conv1D(64, 5, activation="relu"),
        md.keras.layers.GlobalMaxPooling1D(),
        md.keras.layers.Dense(46, activation="softmax"),
    ])
    model.summary()
"""

from __future__ import annotations

from torch import nn

from multidev.keras import backend
from multidev.keras.layers import weight_paths
from multidev.keras.layers.base import Layer
from multidev.keras.layers.input_layer import Input, InputLayer
from multidev.keras.layers.keras_tensor import KerasTensor
from multidev.keras.models import input_dtypes, input_rank
from multidev.keras.models.model import Model


class Sequential(Model):
    """Layers applied in order; built as soon as the input shape is known."""

    def __init__(self, layers=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self._modules["layers"] = nn.ModuleList()    # keys 'layers.<i>.<weight>' in checkpoints
        self._input_batch_shape = None
        self._input_from_call = False   # the input shape was read off the first call, not declared
        self._input_dtype = None
        self._last_output = None
        for layer in layers or []:
            self.add(layer)

    @property
    def layers(self) -> list:
        return list(self._modules["layers"])

    def add(self, layer):
        """Append a layer (or set the input with ``layers.Input(shape=...)`` / an InputLayer)."""
        if isinstance(layer, KerasTensor):
            layer = layer._keras_history[0]
        if isinstance(layer, InputLayer):
            self._set_input(layer._batch_input_shape, layer._input_dtype, layer.output)
            return
        if not isinstance(layer, Layer):
            hint = " Wrap torch modules with md.keras.Model.from_torch(module)." if isinstance(layer, nn.Module) else ""
            raise TypeError(f"The added layer must be an instance of class Layer. Received: layer={layer!r} of type "
                            f"{type(layer).__name__}.{hint}")
        if any(l.name == layer.name for l in self.layers):
            raise ValueError(f'All layers added to a Sequential model should have unique names. Name "{layer.name}" '
                             "is already the name of a layer in this model. Update the `name` argument to pass a unique name.")
        self._modules["layers"].append(layer)
        if len(self.layers) == 1 and self._input_batch_shape is None and layer._batch_input_shape is not None:
            self._set_input(layer._batch_input_shape, backend.as_dtype(None))
        elif self._last_output is not None:
            with weight_paths.layer_scope(self):     # its weights' paths: 'sequential/dense/kernel'
                self._last_output = layer(self._last_output)
            self.built = True

    def pop(self):
        """Remove the last layer."""
        if not self.layers:
            raise TypeError("There are no layers in the model.")
        layer = self._modules["layers"][-1]
        del self._modules["layers"][-1]
        self._rebuild_symbolic()
        return layer

    def _set_input(self, batch_shape, dtype, tensor=None):
        """Record the input; ``tensor`` (the user's ``Input``) becomes ``model.input``, else a new one."""
        self._input_batch_shape = (None,) + tuple(batch_shape[1:])
        self._input_dtype = dtype
        self._first_input = tensor if tensor is not None else Input(batch_shape=self._input_batch_shape, dtype=dtype)
        self._rebuild_symbolic()

    def _rebuild_symbolic(self):
        """Run the layers on a symbolic input: builds weights and records output shapes."""
        if self._input_batch_shape is None:
            return
        x = self._first_input
        with weight_paths.layer_scope(self):
            for layer in self.layers:
                x = layer(x)
        self._last_output = x
        self.built = True

    @property
    def inputs(self) -> list:
        """``[input KerasTensor]`` once the input shape is known (``Input`` first or ``input_shape=``), else []."""
        return [self.__dict__["_first_input"]] if self._has_symbolic() else []

    @property
    def outputs(self) -> list:
        """``[output KerasTensor]`` of the symbolic run over the layers, or [] before the input is known."""
        return [self.__dict__["_last_output"]] if self._has_symbolic() else []

    @property
    def output_shape(self):
        """The last layer's output shape once the input is known (Keras 3: from the symbolic graph)."""
        if self._has_symbolic():   # the graph's (None for unknown dims), not the last batch's
            return tuple(self.__dict__["_last_output"].shape)
        return super().output_shape

    def _has_symbolic(self) -> bool:
        return (self._input_batch_shape is not None and bool(self.layers)
                and self.__dict__.get("_first_input") is not None)

    def build(self, input_shape=None):
        """Build from ``input_shape`` (batch dim included), which then defines ``model.input``."""
        if self._input_batch_shape is None and input_shape is not None and not isinstance(input_shape, list) \
                and self.layers:
            self._set_input(tuple(input_shape), backend.as_dtype(None))
            return
        super().build(input_shape)

    def _maybe_build(self, inputs):
        if self._input_batch_shape is None:
            self._input_batch_shape = (None,) + tuple(inputs.shape[1:])
            self._input_from_call = True
        self.built = True

    def _check_input(self, inputs):
        """A declared input shape is checked; one read off the first call is relaxed where a later call's
        differs (tf.keras makes those dims None, Keras 3 accepts them: a Sequential inside a custom layer sees
        every sequence length), only its rank is fixed."""
        expected = self._input_batch_shape
        if expected is None or not hasattr(inputs, "shape"):
            return
        got = tuple(inputs.shape)
        if not self._input_from_call:   # a declared Input: one rank off by a trailing 1 is conformed (call)
            got = input_rank.adjusted_shape(got, expected)
        if self._input_from_call and len(got) == len(expected):
            self._input_batch_shape = (None,) + tuple(e if e == g else None for e, g in zip(expected[1:], got[1:]))
            return
        if len(got) != len(expected) or any(e is not None and e != g for e, g in zip(expected[1:], got[1:])):
            raise ValueError(f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                             f"shape={expected}, found shape={got}")

    def call(self, inputs, training=None):
        if not self.layers:
            raise ValueError(f'Sequential model "{self.name}" has no layers: add layers before calling it.')
        declared = self._input_batch_shape is not None and not self._input_from_call
        if declared and isinstance(inputs, (list, tuple)) and len(inputs) == 1:
            inputs = inputs[0]   # tf.keras: a declared Input makes a graph, which flattens ``(x,)`` to its input
        x = input_dtypes.conform(inputs, self._input_dtype)
        if declared:
            x = input_rank.adjusted(x, self._input_batch_shape)
        for layer in self.layers:
            x = layer(x)
        return x

    def get_config(self) -> dict:
        from multidev.keras.saving.serialization import serialize_layer
        config = {"name": self.name, "layers": [serialize_layer(l) for l in self.layers]}
        if self._input_batch_shape is not None:
            config["input_shape"] = list(self._input_batch_shape)
            config["input_dtype"] = str(self._input_dtype or "torch.float32").replace("torch.", "")
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from multidev.keras.saving.serialization import deserialize_layer
        model = cls(name=config.get("name"))
        if config.get("input_shape") is not None:
            model.add(InputLayer(batch_input_shape=config["input_shape"], dtype=config.get("input_dtype")))
        for layer_config in config["layers"]:
            model.add(deserialize_layer(layer_config, custom_objects))
        return model
