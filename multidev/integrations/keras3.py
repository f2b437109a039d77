"""Keras 3 (``KERAS_BACKEND=torch``) models under multidev strategies.

Keras 3 on torch keeps each weight in its own ``KerasVariable`` (``variable._value``, a
``torch.nn.Parameter``) and registers the same tensor in a ``torch.nn.ParameterDict``
(``layer._torch_params``). multidev's module hooks mirror the dict's parameters, but Keras's
forward reads its own variables, so a distributed Keras 3 model would train one copy while the
optimizer updates another. Until the replica's copy is substituted where Keras reads a variable,
Keras 3 layers built in a distributing strategy's scope are refused here.

Every private Keras name multidev uses is in this module (checked against Keras 3.15.1); keras
itself is never imported here, only looked up in ``sys.modules`` once the user imported it.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch.nn.modules import module as torch_module

from multidev.distribute import strategy as strategy_module
from multidev.values import context

_CHECKED_VERSIONS = "3.15.1"
_backend_checked = False


def _keras3() -> Any | None:
    """The imported ``keras`` package if it is Keras 3 (None when keras was not imported or is Keras 2)."""
    keras = sys.modules.get("keras")
    version = str(getattr(keras, "__version__", ""))
    if keras is None or not version.startswith("3."):
        return None
    return keras


def _check_backend(strategy: Any) -> None:
    """Scope-entry hook: refuse Keras 3 on a backend other than torch (its weights would not be torch tensors)."""
    global _backend_checked
    if _backend_checked:
        return
    keras = _keras3()
    if keras is None:
        return
    backend = keras.backend.backend()
    if backend != "torch":
        raise ValueError(
            f"Keras 3 is imported with backend {backend!r}, which multidev strategies cannot distribute "
            f"(entering {type(strategy).__name__}.scope()). Set KERAS_BACKEND=torch before importing keras "
            "(e.g. os.environ['KERAS_BACKEND'] = 'torch' at the top of the program), or use md.keras."
        )
    _backend_checked = True


def _distributing_strategy() -> Any | None:
    strategy = context.current_scope_strategy()
    if strategy is None or not strategy.extended._distributes_variables:
        return None
    return strategy


def _on_module(module: torch.nn.Module, name: str, submodule: Any) -> None:
    """Global module-registration hook: a Keras 3 layer registering its weights in a distributing scope."""
    if name != "_torch_params":  # keras.src.backend.torch.layer.TorchLayer._track_variables
        return None
    keras = _keras3()
    if keras is None or not isinstance(module, keras.layers.Layer):
        return None
    strategy = _distributing_strategy()
    if strategy is None:
        return None
    where = "inside strategy.run" if context.current_replica_id() is not None else "in the strategy's scope"
    raise NotImplementedError(
        f"Keras 3 layer {module.name!r} ({type(module).__name__}) built {where} of "
        f"{type(strategy).__name__}: multidev does not distribute Keras 3 models yet. Keras reads its own "
        "variables, not the mirrored copies, so it would train one copy while the optimizer updates "
        "another (wrong weights, no error). Build the model with md.keras instead, or build the Keras 3 "
        "model outside any multidev strategy."
    )


_installed: list = []


def install() -> None:
    """Register the scope-entry and module-registration hooks once (idempotent)."""
    if _installed:
        return
    strategy_module.SCOPE_ENTRY_HOOKS.append(_check_backend)
    _installed.append(torch_module.register_module_module_registration_hook(_on_module))
