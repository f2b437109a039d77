"""``HostInputs``: a layer that takes Python/numpy values (strings, ids) as given and runs on the CPU.

Lookup, hashing and text layers map values that torch cannot hold (strings) in Python; ``Layer``'s
conversion of inputs to tensors and its device autocast do not apply to them.
"""


class HostInputs:
    """Mixin placed before ``Layer``: inputs are not converted, and the layer's device is the CPU."""

    def _convert_inputs(self, inputs):
        return inputs

    @staticmethod
    def _device_type(inputs) -> str:
        return "cpu"


def text_input(layer, inputs):
    """Text (a numpy array of str) given to a layer that is not a ``HostInputs`` one: a model's first layer takes
    it or says why not (``Sequential([vectorize_layer, model])``); any other layer cannot compute on it."""
    if hasattr(layer, "layers"):
        return inputs
    raise ValueError(f'Layer "{layer.name}" ({type(layer).__name__}) received text (a numpy array of dtype '
                     f"{inputs.dtype}, shape {inputs.shape}), which it cannot compute on: map strings to numbers "
                     "first (a TextVectorization or StringLookup layer before it).")
