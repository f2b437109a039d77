"""Keras 3's TimeDistributed wrapper: one layer applied to every time step of (batch, time, ...) inputs.

Example:
    y = md.keras.layers.TimeDistributed(md.keras.layers.Dense(8))(torch.zeros(4, 10, 16))   # (4, 10, 8)
"""

from __future__ import annotations

from multidev.keras.layers.base import Layer


class TimeDistributed(Layer):
    """Apply ``layer`` to every time step: (batch, time, ...) -> (batch * time, ...) -> layer -> back.
    Its weights are the wrapped layer's (one set, shared by all steps)."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(layer, Layer):
            raise ValueError(f"Please initialize `TimeDistributed` layer with a `keras.layers.Layer` instance. "
                             f"Received: {layer!r}")
        self.layer = layer

    def call(self, inputs, training=False):
        b, t = inputs.shape[0], inputs.shape[1]
        flat = inputs.reshape(b * t, *inputs.shape[2:])
        out = self.layer(flat, training=training)
        return out.reshape(b, t, *out.shape[1:])


