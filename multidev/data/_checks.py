"""Argument checks shared by dataset transformations (TF's exception types and wording)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from multidev._core.errors import ArgumentTypeError, InvalidArgumentError


def as_int(name: str, value: Any) -> int:
    """``value`` as a Python int (ints, numpy ints, 0-d integer tensors), else TypeError."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}.")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.dtype.is_floating_point and value.dtype != torch.bool:
        return int(value.item())
    raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}.")


def positive(name: str, value: Any) -> int:
    """An int > 0, else InvalidArgumentError naming the value."""
    n = as_int(name, value)
    if n <= 0:
        raise InvalidArgumentError(f"{name} must be greater than zero, got {name}={n!r}.")
    return n


def count_or_all(name: str, value: Any) -> int:
    """An int, any negative one becoming -1 ('all'/'forever'): TensorFlow's take, skip and repeat
    treat every negative count as -1."""
    n = as_int(name, value)
    return -1 if n < 0 else n


def parallelism(name: str, value: Any) -> int | None:
    """None, AUTOTUNE (-1) or a positive int."""
    if value is None:
        return None
    n = as_int(name, value)
    if n == -1 or n > 0:
        return n
    raise InvalidArgumentError(f"{name} must be a positive integer or md.data.AUTOTUNE (-1), got {n!r}.")


def callable_arg(name: str, value: Any) -> Any:
    """``value`` if callable, else a TypeError that is also TF's ValueError."""
    if not callable(value):
        raise ArgumentTypeError(f"{name} must be callable, got {value!r} of type {type(value).__name__}.")
    return value
