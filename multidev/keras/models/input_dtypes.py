"""A model's inputs in its ``Input``s' dtypes, where Keras casts them and md.keras's layers would not.

Keras (tf.keras and Keras 3) converts what a model is called with to each ``Input``'s dtype. md.keras's layers
cast floating inputs themselves (autocasting) and take integer ids as they are, so the one case left is a
bool tensor fed to a floating ``Input``: keras.io's character-level text generation trains an ``LSTM`` on
bool one-hot windows (``np.zeros(..., dtype="bool")``), which torch refuses to multiply by float weights.
"""

from __future__ import annotations

import torch


def conform(value, dtype):
    """``value`` cast to ``dtype`` when it is a bool tensor and ``dtype`` a floating dtype; else unchanged."""
    if (isinstance(value, torch.Tensor) and value.dtype == torch.bool and isinstance(dtype, torch.dtype)
            and dtype.is_floating_point):
        return value.to(dtype)
    return value
