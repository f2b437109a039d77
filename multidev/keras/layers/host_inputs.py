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
