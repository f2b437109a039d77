"""``torch.jit.script``-ed modules over distributed variables: refused where a replica would train them.

TorchScript reads a parameter tensor itself: no replica-aware dict (``module_hooks``), no
``__torch_function__``. A module scripted in ``strategy.scope()`` (``self.block = torch.jit.script(Block())``)
holds the distributed variables, so inside ``strategy.run`` every replica computes with the variable's
own storage and accumulates into its one ``.grad``, which the reduction in backward (hooked on each
replica's copy) never sees: the scripted weights stay as they were (measured: 0.1 off DDP's weights after
4 steps under ``multidev launch --workers 2``), or the replicas race on the one ``.grad``. While strategies
live ``torch.jit.script`` is wrapped to note such modules' variables; an optimizer over one of them is
refused when its plan is made inside ``strategy.run`` (``optimizer_hooks``), before any update, on any
replica count; with several local replicas the module's first forward already refuses
(``refuse_forward``). Scripting for inference after training (outside ``strategy.run``)
is left alone. Not caught: ``from torch.jit import script`` bound before the first strategy.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

from multidev.values.variables import DistributedVariable

_SCRIPTED: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()   # id(variable) -> module
_HELD: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()   # module -> its variables' names


def _noted(module: Any) -> Any:
    """Note the distributed variables a freshly scripted module holds."""
    if isinstance(module, torch.jit.ScriptModule):
        names = []
        for name, p in module.named_parameters():
            if isinstance(p, DistributedVariable):
                _SCRIPTED[id(p)] = module
                names.append(name)
        if names:
            _HELD[module] = names
    return module


def refuse(optimizer: torch.optim.Optimizer, params: list, strategy: Any) -> None:
    """``ValueError`` when ``params`` holds a variable a scripted module reads (inside ``strategy.run``)."""
    if not _SCRIPTED:
        return
    module = next((m for m in (_SCRIPTED.get(id(p)) for p in params) if m is not None), None)
    if module is not None:
        raise _error(f"{type(optimizer).__name__}.step() inside {type(strategy).__name__}.run would train the "
                     f"variables of the torch.jit.script-ed module", module, _HELD.get(module, []))


def refuse_forward(module: torch.jit.ScriptModule, env: Any) -> None:
    """The module's first forward in a replica (``module_hooks``' guard of a step function's first runs)."""
    held = [n for n, p in module.named_parameters() if isinstance(p, DistributedVariable)]
    if held:
        raise _error(f"{type(env.strategy).__name__}.run called the torch.jit.script-ed module", module, held)


def _error(what: str, module: Any, names: list) -> ValueError:
    return ValueError(
        f"{what} {module.original_name}, which holds variables created in a strategy's scope (parameters "
        f"{names[:4]!r}{' ...' if len(names) > 4 else ''}). TorchScript reads a parameter tensor itself, so it cannot "
        "give each replica its own copy: every replica computes with one copy and adds its gradient into one .grad "
        "that no cross-replica reduction sees (its weights would not train as DDP trains them). Keep the module "
        "eager under the strategy (drop torch.jit.script; torch.compile(model) works on replicas), or script it "
        "after training for inference.")


def install() -> Callable[[], None]:
    """Wrap ``torch.jit.script`` while strategies live."""
    original = torch.jit.script

    def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
        return _noted(original(obj, *args, **kwargs))
    script.__wrapped__ = original
    script.__doc__ = original.__doc__
    torch.jit.script = script

    def remove() -> None:
        torch.jit.script = original
    return remove
