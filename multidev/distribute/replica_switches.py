"""A library's switch of module-wide state, called inside ``strategy.run``, runs once with every local
replica paused at the call, as ``merge_call`` does, so no replica runs a forward in a state another
replica set for itself.

DDP's ranks each own their model, so a step that switches some of its state for a reference pass and
back (peft's ``with model.disable_adapter():``, ``model.set_adapter("ref")``) switches each rank's
alone. Replica threads share the model: its flags (``_disable_adapters``, the active adapter) and the
``requires_grad`` of its distributed variables. Values a module writes on itself may be kept per
replica (``replica_attributes``); ``requires_grad`` cannot be (it decides which gradients the
replicas reduce together), so such a switch is made once, for all replicas: between two switches all
of them see one state, as each rank sees its own. A switch that only some replicas make is refused at
once, as any collective they do not all reach (``merge_call(<the switch>)`` in the error).

Front ends wrap their libraries' switches with ``once_in_replicas`` (``integrations/peft.py``).
"""

from __future__ import annotations

from typing import Any, Callable

from multidev.values import context


def once_in_replicas(original: Callable, needed: Callable[..., bool] = lambda module, *a, **k: True) -> Callable:
    """``original(module, ...)`` as a switch of module-wide state: in replica context, where
    ``needed(module, ...)``, every local replica waits at the call and ``original`` runs once per
    distinct module (one the replicas share, or one each built in the step) in cross-replica context,
    and the call returns None. Elsewhere ``original`` runs as is."""
    def switch(self: Any, *args: Any, **kwargs: Any) -> Any:
        replica = context.current_replica_context()
        if replica is None or not needed(self, *args, **kwargs):
            return original(self, *args, **kwargs)

        def once(strategy: Any, modules: Any) -> None:
            distinct = {id(m): m for m in strategy.experimental_local_results(modules)}
            for module in distinct.values():
                original(module, *args, **kwargs)

        once.__qualname__ = original.__qualname__   # what a collective mismatch names
        replica.merge_call(once, args=(self,))
        return None

    switch._multidev_wrapped = True
    return switch
