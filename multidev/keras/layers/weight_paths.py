"""Keras 3's ``variable.path`` (``'sequential/dense/kernel'``): the names of the layers being built or
first called when a weight is made, then the weight's own name.

Keras 3 opens a name scope for a layer around its ``build`` and its ``__call__``, and ``add_weight``
names the variable inside it, so a layer that a model builds (``Sequential``, a subclassed model's
first call) puts the model's name first, and a layer built on its own (a functional model's layers,
built when called on ``Input``) has ``'dense/kernel'``. Here the scope is kept only while a layer
is built or called unbuilt (the only time weights are made), so a built model's calls pay nothing.
"""

from __future__ import annotations

import contextlib
import contextvars

_SCOPE: contextvars.ContextVar[tuple] = contextvars.ContextVar("md_keras_weight_scope", default=())


@contextlib.contextmanager
def layer_scope(layer):
    """Name ``layer``'s weights, and those of the layers it builds, under ``layer.name``."""
    token = _SCOPE.set(_SCOPE.get() + (layer,))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def path_for(layer, name: str) -> str:
    """The path of ``layer``'s weight ``name`` made now (``layer`` once, also outside its own scope:
    a weight made in ``__init__``)."""
    scope = _SCOPE.get()
    owners = scope if scope and scope[-1] is layer else scope + (layer,)
    return "/".join([*(owner.name for owner in owners), name])
