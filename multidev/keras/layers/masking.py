"""Masking: marks time steps whose features all equal ``mask_value`` as padding for the layers after it.

Example:
    x = md.keras.layers.Masking(mask_value=0.0)(inputs)   # (B, T, F); steps of all zeros are skipped
    y = md.keras.layers.LSTM(8)(x)                        # the LSTM keeps its state across masked steps
"""

from __future__ import annotations

import torch

from multidev.keras.layers.base import Layer


class Masking(Layer):
    """Zero the masked steps and give the output the mask ``any(inputs != mask_value, axis=-1)``.

    Example:
        >>> out = md.keras.layers.Masking(mask_value=0.0)(torch.tensor([[[1.0], [0.0]]]))
        >>> out._keras_mask
        tensor([[ True, False]])
    """

    supports_masking = True

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = mask_value

    def compute_mask(self, inputs, mask=None):
        return torch.ne(inputs, self.mask_value).any(dim=-1)

    def call(self, inputs):
        keep = self.compute_mask(inputs)
        return inputs * keep.unsqueeze(-1).to(inputs.dtype)

    def get_config(self):
        return {**super().get_config(), "mask_value": self.mask_value}
