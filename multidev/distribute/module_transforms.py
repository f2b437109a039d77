"""torch's parametrizations of parameters created in ``strategy.scope()``. torch's function is wrapped
while a strategy lives (``live_hooks``) and put back when the last one is freed.

* ``torch.nn.utils.parametrize.register_parametrization`` (``parametrizations.weight_norm``,
  ``orthogonal``, ``spectral_norm``, a user's): torch builds the parametrization's ``original``
  parameters with ``torch.nn.Parameter(...)`` from the module's tensor, which a distributed variable
  cannot be (its ``detach()`` is a plain tensor). The wrapper hands torch a plain parameter holding
  the variable's value instead; inside the scope the new ``original*`` parameters are registered,
  and so become distributed variables, like any other. Outside the scope they stay plain and the
  first replica that calls the module refuses it (``module_hooks.shared_module_guard``).
* ``torch.nn.utils.weight_norm`` (deprecated by torch), the legacy ``torch.nn.utils.spectral_norm`` and
  ``torch.nn.utils.prune`` need nothing here: their forward pre-hooks recompute ``module.weight`` into
  a plain attribute of the module, which ``replica_attributes`` keeps per replica.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch.nn.utils import parametrize

from multidev.values import context
from multidev.values.variables import DistributedVariable


def _plain_parameter_for(module: torch.nn.Module, name: str) -> Callable[[], None] | None:
    """Put a plain parameter with the value of ``module``'s distributed ``name`` in its place; returns
    how to undo it (None: ``name`` is no distributed variable)."""
    current = dict.get(module._parameters, name)
    if not isinstance(current, DistributedVariable) or context.current_replica_id() is not None:
        return None
    with torch.no_grad():
        plain = torch.nn.Parameter(current._components[0].detach().clone(), requires_grad=current.requires_grad)
    dict.__setitem__(module._parameters, name, plain)
    return lambda: dict.__setitem__(module._parameters, name, current)


def _register_parametrization(original: Callable) -> Callable:
    @functools.wraps(original)
    def wrapper(module: torch.nn.Module, tensor_name: str, *args: Any, **kwargs: Any) -> Any:
        undo = _plain_parameter_for(module, tensor_name)
        try:
            return original(module, tensor_name, *args, **kwargs)
        except BaseException:
            if undo is not None:
                undo()
            raise

    wrapper._multidev_wrapped = True
    return wrapper


def install() -> Callable[[], None]:
    """Wrap torch's transforms; returns how to put torch's back (``live_hooks.STRATEGY_HOOKS`` calls
    both while strategies live)."""
    undo: list[Callable[[], None]] = []
    register = parametrize.register_parametrization
    if not getattr(register, "_multidev_wrapped", False):
        parametrize.register_parametrization = _register_parametrization(register)
        undo.append(lambda: setattr(parametrize, "register_parametrization", register))
    return lambda: [u() for u in reversed(undo)]
