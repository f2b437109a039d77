"""Input and InputLayer: the entry points of functional and Sequential models.

Example:
    inputs = md.keras.layers.Input(shape=(300,), dtype="int32")
"""

from __future__ import annotations

from multidev.keras import backend
from multidev.keras.layers.base import Layer
from multidev.keras.layers.keras_tensor import KerasTensor, Node


#: Why md has no ``tf.string`` / string Input, and what to write instead (also ``md.string``'s error).
NO_STRING_INPUTS = ("its tensors are torch tensors, which hold numbers only. Map strings to ids before the model, "
                    "in the dataset: `ds.map(lambda x, y: (lookup(x), y))` with the adapted "
                    "StringLookup/TextVectorization/Hashing, and give the model an Input(dtype='int64'). (TF's "
                    "MirroredStrategy fails some models with string inputs too.)")


class InputLayer(Layer):
    """Layer that holds a model input placeholder; it has no weights and returns its input."""

    def __init__(self, input_shape=None, batch_size=None, dtype=None, name=None, batch_input_shape=None, **kwargs):
        if batch_input_shape is None:
            if input_shape is None:
                raise ValueError("InputLayer needs `input_shape` (or `batch_input_shape`), e.g. InputLayer(input_shape=(8,)).")
            batch_input_shape = (batch_size,) + tuple(input_shape)
        name = name or backend.unique_name("input")
        super().__init__(name=name, batch_input_shape=batch_input_shape, **kwargs)
        if dtype in ("string", "str", str, object):
            raise ValueError(f"md.keras has no string inputs (Input(dtype={dtype!r})): " + NO_STRING_INPUTS)
        self._input_dtype = backend.as_dtype(dtype or "float32")
        self.built = True
        tensor = KerasTensor(self._batch_input_shape, self._input_dtype, history=(self, 0, 0), name=self.name)
        self._inbound_nodes.append(Node(self, [], [tensor], {}))
        self._output_shape = self._batch_input_shape

    @property
    def output(self) -> KerasTensor:
        return self._inbound_nodes[0].outputs[0]

    def call(self, inputs):
        return inputs

    def get_config(self):
        return {"batch_input_shape": list(self._batch_input_shape),
                "dtype": str(self._input_dtype).replace("torch.", ""), "name": self.name}


def Input(shape=None, batch_size=None, name=None, dtype=None, batch_shape=None, **kwargs):
    """Create a symbolic input of ``shape`` (batch dim excluded) for the functional API."""
    if shape is None and batch_shape is None:
        raise ValueError("Please provide to Input a `shape` or a `batch_shape` argument, e.g. Input(shape=(32,)).")
    if isinstance(shape, int):
        shape = (shape,)
    layer = InputLayer(input_shape=shape, batch_size=batch_size, name=name, dtype=dtype,
                       batch_input_shape=batch_shape, **kwargs)
    return layer.output
