"""A seam for symbolic front ends: a TF-named ``md.*`` op called on a front end's placeholder tensors
(md.keras's functional ``KerasTensor``s) builds that front end's graph node instead of running, as
tf.keras 2 turns ``tf.concat([a, b], 1)`` on KerasTensors into a ``TFOpLambda`` layer.

The front end registers its placeholder type and a handler; this module imports nothing above it.
"""

from __future__ import annotations

import torch

_HANDLERS: list = []   # [(placeholder types, handler(fn, public_name, args, kwargs))]


def register(types: tuple, handler) -> None:
    """Route ``md.*`` ops with an argument of ``types`` (nested in lists/tuples/dicts too) to ``handler``."""
    _HANDLERS[:] = [(tuple(types), handler)]


def contains(value, types) -> bool:
    """Whether ``value`` or anything nested in its lists/tuples/dicts is an instance of ``types``."""
    kind = type(value)
    if kind is torch.Tensor:        # the eager case, first: every op call passes here
        return False
    if kind is list or kind is tuple:
        for item in value:          # a loop, not any(genexpr): every md.* op call passes here
            if contains(item, types):
                return True
        return False
    if kind is dict:
        return contains(list(value.values()), types)
    return isinstance(value, types)


def handler_for(args, kwargs):
    """The registered handler when an argument is symbolic, else None (the common, eager case)."""
    for types, handler in _HANDLERS:
        if contains(args, types) or (kwargs and contains(kwargs, types)):
            return handler
    return None
