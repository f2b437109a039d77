"""An input one rank off a model's declared ``Input`` by a trailing 1, as Keras 3 (``Functional._adjust_input_rank``)
and tf.keras 2 conform it: keras.io's 3D image classification predicts ``np.expand_dims(x_val[0], axis=0)``, a
(1, W, H, D) volume, on ``Input((W, H, D, 1))``. One rank short with an expected trailing 1: the axis is added; one
rank long with a trailing 1: it is dropped; anything else is left for the shape check to refuse."""

from __future__ import annotations

from typing import Any

import torch


def adjusted_shape(shape: tuple, expected: tuple) -> tuple:
    """``shape`` as the adjustment makes it (unchanged where no rule applies)."""
    if len(shape) == len(expected) - 1 and expected and expected[-1] == 1:
        return (*shape, 1)
    if len(shape) == len(expected) + 1 and shape and shape[-1] == 1:
        return tuple(shape[:-1])
    return tuple(shape)


def adjusted(value: Any, expected: tuple) -> Any:
    """``value`` (a tensor) with the trailing 1 added or dropped (a view); other values as they are."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = tuple(value.shape)
    if len(shape) == len(expected) - 1 and expected and expected[-1] == 1:
        return value.unsqueeze(-1)
    if len(shape) == len(expected) + 1 and shape and shape[-1] == 1:
        return value.squeeze(-1)
    return value
