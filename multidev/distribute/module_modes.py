"""``model.eval()`` / ``model.train()`` inside ``strategy.run`` switch the module's mode once, with every
local replica paused at the call, as ``merge_call`` does, so no replica runs a forward in the other
replicas' mode.

DDP's ranks each own their module, so a step that evaluates a reference pass in eval mode and then
trains (``model.eval()``; ``with torch.no_grad(): ref = model(x)``; ``model.train()``; ...) switches
each rank's flag alone. Replica threads share one module and one ``training`` flag per submodule: a
replica that switched to eval mode turned dropout off under the other replica's training forward (and
back on under its reference pass), silently and depending on timing (0.01 off DDP's ViT weights after
3 steps). Now, in replica context, a call that would change any submodule's mode waits for every local
replica to make it, runs torch's ``train`` once, and lets them go on: between two switches all replicas
read the same mode, as each rank reads its own. A call that changes nothing (``model.train()`` at the top
of every step) runs as torch's, without waiting. A switch that only some replicas make is refused at
once, as any collective they do not all reach (``merge_call(Module.train)`` in the error). Outside
``strategy.run`` torch's method runs as is.

Not covered: ``module.training = False`` written directly inside the step (torch's ``train`` is the
switch torch's own modules and libraries call).

Installed while a strategy lives (``live_hooks``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from multidev.values import context


def once_in_replicas(original: Callable, needed: Callable[..., bool] = lambda module, *a, **k: True) -> Callable:
    """``original(module, ...)`` as a switch of module-wide state: in replica context, where
    ``needed(module, ...)``, every local replica waits at the call and ``original`` runs once per
    distinct module (one the replicas share, or one each built in the step) in cross-replica context,
    and the call returns None. Elsewhere ``original`` runs as is. Front ends wrap their libraries'
    switches with it (``integrations/peft.py``)."""
    def switch(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        replica = context.current_replica_context()
        if replica is None or not needed(self, *args, **kwargs):
            return original(self, *args, **kwargs)

        def once(strategy: Any, modules: Any) -> None:
            distinct = {id(m): m for m in strategy.experimental_local_results(modules)}
            for module in distinct.values():
                original(module, *args, **kwargs)

        once.__qualname__ = original.__qualname__   # what a collective mismatch names: "Module.train"
        replica.merge_call(once, args=(self,))
        return None

    switch._multidev_wrapped = True
    return switch


def _changes(module: torch.nn.Module, mode: Any = True) -> bool:
    """Whether ``module.train(mode)`` changes a submodule's mode (a mode that is no bool: torch's error)."""
    return isinstance(mode, bool) and any(m.training != mode for m in module.modules())


def _switch(original: Callable) -> Callable:
    """torch's ``train(mode)``, once with the replicas paused where it changes a submodule's mode."""
    switch = once_in_replicas(original, _changes)

    @functools.wraps(original)
    def train(self: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
        switch(self, mode)
        return self

    train._multidev_wrapped = True
    return train


def install() -> Callable[[], None]:
    """Wrap ``torch.nn.Module.train`` (``eval`` calls it); returns the function that unwraps it."""
    original = torch.nn.Module.__dict__["train"]
    torch.nn.Module.train = _switch(original)

    def remove() -> None:
        torch.nn.Module.train = original

    return remove
