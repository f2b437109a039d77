"""Argument checks of ``Strategy.reduce`` and ``Strategy.gather``, run before any data moves.

TensorFlow's answers: an axis that is not an integer is a ``TypeError``; an axis outside the
values' rank an ``InvalidArgumentError`` (gathering a scalar a ``ValueError``); a value that is no tensor (nor convertible to one) a
``TypeError`` (``ValueError`` for a number too large for any dtype).
"""

from __future__ import annotations

from typing import Any

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.values.distributed import DistributedValues, flatten
from multidev.values.variables import DistributedVariable


def check_reduce_arguments(api: str, value: Any, axis: Any, axis_required: bool = False) -> None:
    """Raise the TF exception for a bad ``axis`` or a leaf of ``value`` that is no tensor.

    Example:
        >>> check_reduce_arguments("strategy.reduce", torch.ones(2), axis="0")
        Traceback (most recent call last):
        TypeError: strategy.reduce: axis must be an int or None, got '0' (str). ...
    """
    if not (axis is None and not axis_required) and (isinstance(axis, bool) or not isinstance(axis, int)):
        choices = "an int" if axis_required else "an int or None"
        raise TypeError(f"{api}: axis must be {choices}, got {axis!r} ({type(axis).__name__}). "
                        "Pass e.g. axis=0 for the batch dimension.")
    for leaf in flatten(value):
        for component in _components(leaf):
            tensor = _as_tensor(api, component)
            if axis_required and tensor.dim() == 0:   # TensorFlow's gather: ValueError before any axis check
                raise ValueError(f"{api}: cannot gather the scalar {component!r} along axis {axis!r}; values must "
                                 "have rank >= 1 to be concatenated along an axis. Reshape it first, e.g. x[None].")
            if axis is not None and not -tensor.dim() <= axis < tensor.dim():
                valid = f"expected {-tensor.dim()}..{tensor.dim() - 1}" if tensor.dim() else "a scalar has no axis"
                raise InvalidArgumentError(
                    f"{api}: axis {axis!r} is out of range for a value of shape {tuple(tensor.shape)} "
                    f"(rank {tensor.dim()}): {valid}." + ("" if axis_required else " Use axis=None to reduce whole values.")
                )


def _components(leaf: Any) -> list:
    if isinstance(leaf, DistributedVariable):
        return list(leaf.values)
    if isinstance(leaf, DistributedValues):
        return list(leaf.values)
    return [leaf]


def _as_tensor(api: str, value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (OverflowError, RuntimeError) as err:
        if isinstance(value, (int, float)):
            raise ValueError(f"{api}: the number {value!r} does not fit any tensor dtype ({err}).") from None
        raise TypeError(_not_a_tensor(api, value)) from None
    except (TypeError, ValueError):
        raise TypeError(_not_a_tensor(api, value)) from None


def _not_a_tensor(api: str, value: Any) -> str:
    return (f"{api}: cannot convert {value!r} ({type(value).__name__}) to a tensor; values must be tensors, "
            "numbers, arrays or nested tuples/lists/dicts of them (e.g. the result of strategy.run).")


__all__ = ["check_reduce_arguments"]
