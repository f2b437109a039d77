"""torch's module transforms on parameters created in ``strategy.scope()``: parametrizations work,
the legacy ``torch.nn.utils.weight_norm`` and ``spectral_norm`` are refused with the fix. torch's functions are wrapped
while a strategy lives (``live_hooks``) and put back when the last one is freed.

* ``torch.nn.utils.parametrize.register_parametrization`` (``parametrizations.weight_norm``,
  ``orthogonal``, ``spectral_norm``, a user's): torch builds the parametrization's ``original``
  parameters with ``torch.nn.Parameter(...)`` from the module's tensor, which a distributed variable
  cannot be (its ``detach()`` is a plain tensor). The wrapper hands torch a plain parameter holding
  the variable's value instead; inside the scope the new ``original*`` parameters are registered,
  and so become distributed variables, like any other. Outside the scope they stay plain and the
  first replica that calls the module refuses it (``module_hooks.shared_module_guard``).
* ``torch.nn.utils.weight_norm`` (deprecated by torch) and the legacy ``torch.nn.utils.spectral_norm``
  recompute ``module.weight`` into a plain attribute of the module before each call; replicas share
  the module object, so they would overwrite each other's weight between that write and the forward
  that reads it (and backward would reach another replica's copy). Refused, naming the
  ``torch.nn.utils.parametrizations`` replacement.
"""

from __future__ import annotations

import functools
import importlib
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


def _legacy(original: Callable, function: str, replacement: str) -> Callable:
    """``original`` (a legacy transform's ``apply(module, name, *args)``), refusing a distributed ``name``."""
    @functools.wraps(original)
    def apply(module: torch.nn.Module, name: str, *args: Any, **kwargs: Any) -> Any:
        var = dict.get(module._parameters, name)
        if isinstance(var, DistributedVariable):
            raise ValueError(
                f"torch.nn.utils.{function}({type(module).__name__}, name={name!r}) on a module built in "
                f"{type(var._strategy).__name__}.scope(): this legacy {function} recomputes the weight into one "
                f"attribute that every replica's forward would overwrite. Use "
                f"torch.nn.utils.parametrizations.{replacement}(module, name) instead (supported in the scope).")
        return original(module, name, *args, **kwargs)

    apply._multidev_wrapped = True
    return apply


#: (torch module, class, function name, its parametrized replacement) of the legacy transforms refused.
_LEGACY = (("torch.nn.utils.weight_norm", "WeightNorm", "weight_norm", "weight_norm"),
           ("torch.nn.utils.spectral_norm", "SpectralNorm", "spectral_norm", "spectral_norm"))


def install() -> Callable[[], None]:
    """Wrap torch's transforms; returns how to put torch's back (``live_hooks.STRATEGY_HOOKS`` calls
    both while strategies live)."""
    undo: list[Callable[[], None]] = []
    register = parametrize.register_parametrization
    if not getattr(register, "_multidev_wrapped", False):
        parametrize.register_parametrization = _register_parametrization(register)
        undo.append(lambda: setattr(parametrize, "register_parametrization", register))
    for module_name, class_name, function, replacement in _LEGACY:
        cls = getattr(importlib.import_module(module_name), class_name)   # the module, not the function
        apply = cls.__dict__["apply"]   # the staticmethod object itself
        if not getattr(cls.apply, "_multidev_wrapped", False):
            cls.apply = staticmethod(_legacy(cls.apply, function, replacement))
            undo.append(lambda cls=cls, apply=apply: setattr(cls, "apply", apply))
    return lambda: [u() for u in reversed(undo)]
