"""A model input one rank off its declared shape, adjusted as Keras adjusts it.

tf.keras and Keras 3 both conform what a Functional or Sequential model (one with a declared input) is
called with: a tensor one rank short of the ``Input`` whose last dim is 1 gets that axis added (the
regression tutorial's ``Sequential([Normalization(input_shape=[1,], axis=None), Dense(1)])`` fit and
predicted on a 1-D horsepower column), one a rank over whose last dim is 1 has it squeezed. Anything
else is left for the shape check to refuse.
"""

from __future__ import annotations

import torch


def adjust(value, batch_shape):
    """``value`` with its last axis added or squeezed to match ``batch_shape``'s rank, where Keras does."""
    if batch_shape is None or not isinstance(value, torch.Tensor):
        return value
    rank, want = value.dim(), len(batch_shape)
    if rank == want + 1 and rank > 1 and value.shape[-1] == 1:
        return value.squeeze(-1)
    if rank == want - 1 and want > 1 and batch_shape[-1] == 1:
        return value.unsqueeze(-1)
    return value
