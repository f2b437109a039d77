"""Activation layers of Keras 3: ReLU, LeakyReLU, PReLU, Softmax, ELU.

``ReLU(max_value, negative_slope, threshold)`` is Keras's: ``x`` for ``threshold < x < max_value``,
``max_value`` above, ``negative_slope * (x - threshold)`` below.

Example:
    h = md.keras.layers.ReLU()(md.keras.layers.Conv1D(8, 3)(inputs))
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras import activations, initializers, regularizers
from multidev.keras.layers.base import Layer


def _non_negative(name, value):
    if value is not None and value < 0:
        raise ValueError(f"{name} of a ReLU layer cannot be a negative value. Received: {name}={value!r}")


class ReLU(Layer):
    """Rectified linear unit with optional ceiling, leak and threshold (Keras's ``layers.ReLU``)."""

    supports_masking = True

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("max_value", max_value), ("negative_slope", negative_slope), ("threshold", threshold)):
            _non_negative(name, value)
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def call(self, inputs):
        return activations.relu(inputs, self.negative_slope, self.max_value, self.threshold)

    def get_config(self):
        return {**super().get_config(), "max_value": self.max_value, "negative_slope": self.negative_slope,
                "threshold": self.threshold}


class LeakyReLU(Layer):
    """``x`` for positive inputs, ``negative_slope * x`` otherwise (Keras 3's default slope 0.3)."""

    supports_masking = True

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:  # the Keras 2 name of the slope
            negative_slope = kwargs.pop("alpha")
        super().__init__(**kwargs)
        _non_negative("negative_slope", negative_slope)
        self.negative_slope = negative_slope

    def call(self, inputs):
        return F.leaky_relu(inputs, self.negative_slope)

    def get_config(self):
        return {**super().get_config(), "negative_slope": self.negative_slope}


class Softmax(Layer):
    """Softmax over ``axis`` (an int, or several axes); a ``mask`` (True or > 0.5: keep) sets masked entries
    to -1e9 before and to 0 after, as Keras 3's (a fully masked row is all zeros)."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs, mask=None):
        if mask is None and isinstance(self.axis, int):
            return activations.softmax(inputs, axis=self.axis)   # keeps its logits, as Keras's
        keep = None
        if mask is not None:       # Keras 3's masked output is a new tensor: it keeps no logits
            keep = mask if mask.dtype == torch.bool else mask > 0.5
            inputs = torch.where(keep, inputs, torch.tensor(-3e4 if inputs.dtype == torch.float16 else -1e9,
                                                            dtype=inputs.dtype, device=inputs.device))
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        if len(axes) > 1:
            out = torch.exp(inputs - torch.logsumexp(inputs, dim=axes, keepdim=True))
        else:
            out = torch.softmax(inputs, dim=axes[0])
        return out if keep is None else torch.where(keep, out, torch.zeros((), dtype=out.dtype, device=out.device))

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


class ELU(Layer):
    """Exponential linear unit: ``x`` if positive, ``alpha * (exp(x) - 1)`` otherwise."""

    supports_masking = True

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = alpha

    def call(self, inputs):
        return F.elu(inputs, self.alpha)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


class PReLU(Layer):
    """Leaky ReLU with a learned slope ``alpha`` per input element (``shared_axes``: one slope along
    those axes): ``relu(x) - alpha * relu(-x)``; alpha has the input's shape without the batch axis."""

    supports_masking = True

    def __init__(self, alpha_initializer="zeros", alpha_regularizer=None, alpha_constraint=None, shared_axes=None,
                 **kwargs):
        super().__init__(**kwargs)
        if alpha_constraint is not None:
            raise NotImplementedError("PReLU(alpha_constraint=...) is not implemented in md.keras.")
        self.alpha_initializer = initializers.get(alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.shared_axes = None if shared_axes is None else (
            [shared_axes] if isinstance(shared_axes, int) else list(shared_axes))

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for axis in self.shared_axes or []:
            shape[axis - 1] = 1
        self.add_weight("alpha", tuple(shape), self.alpha_initializer, regularizer=self.alpha_regularizer)

    def call(self, inputs):
        return F.relu(inputs) - self.alpha * F.relu(-inputs)

    def get_config(self):
        return {**super().get_config(), "alpha_initializer": initializers.serialize(self.alpha_initializer),
                "alpha_regularizer": regularizers.serialize(self.alpha_regularizer), "shared_axes": self.shared_axes}
