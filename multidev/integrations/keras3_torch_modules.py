"""torch modules inside Keras 3 models (``keras.layers.TorchModuleWrapper``, or a ``torch.nn.Module`` set as a
Keras layer's attribute, which Keras wraps) in a mirrored strategy's scope.

Keras wraps each of the module's parameters in a Keras variable that reuses the parameter itself
(``Variable(initializer=param)``), and the module's forward reads its parameters, not the variables. Created
in the scope, the module's parameters are already multidev's distributed variables (replica r's forward reads
copy r), so the Keras variable takes that very variable as its value: its gradients are then summed by Keras's
``optimizer.apply``, as every Keras 3 weight's (not also in ``loss.backward()``), and the module reads what
the optimizer writes. (An md variable is callable, TensorFlow's ``v()``, which Keras would take for an
initializer.) A module created outside the scope has plain parameters, which every replica would share: its
first call in ``strategy.run`` is refused (multidev's torch-module check).
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable

from multidev.values.distributed_variable import DistributedVariable

_ADOPTED: contextvars.ContextVar[DistributedVariable | None] = contextvars.ContextVar("multidev_keras3_adopted",
                                                                                      default=None)


def variable_init(original: Any, variable: Any, *args: Any, **kwargs: Any) -> None:
    """Keras ``Variable.__init__``: an initializer that is a distributed variable becomes the variable's value."""
    parameter = kwargs.get("initializer", args[0] if args else None)
    if not isinstance(parameter, DistributedVariable):
        return original(variable, *args, **kwargs)
    first = parameter.values[0].detach()   # a plain tensor for Keras's checks (dtype, shape)
    args, kwargs = ((first, *args[1:]), kwargs) if args else (args, {**kwargs, "initializer": first})
    token = _ADOPTED.set(parameter)
    try:
        return original(variable, *args, **kwargs)
    finally:
        _ADOPTED.reset(token)


def initialize(original: Any, variable: Any, value: Any) -> None:
    """Keras ``Variable._initialize`` (around ``keras3._initialize``): take the adopted distributed variable, else
    initialize as ``keras3`` does."""
    adopted = _ADOPTED.get()
    if adopted is None:
        return original(variable, value)
    _ADOPTED.set(None)   # this variable only
    adopted._reduce_in_backward = False   # Keras's optimizer.apply sums the gradients
    variable._value = adopted
    return None


def install(wrap_method: Callable[[type, str, Any], None], variable_cls: type) -> None:
    """Wrap ``variable_cls.__init__`` and (outermost) its ``_initialize``."""
    wrap_method(variable_cls, "_initialize", initialize)
    wrap_method(variable_cls, "__init__", variable_init)
