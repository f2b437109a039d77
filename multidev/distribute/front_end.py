"""The protocol through which a front end (``multidev/integrations``: Keras 3) joins strategies.

The distribute layer never imports a front end: a front end registers itself (``register``) at its
import, and strategies then call it on each scope entry and install its torch hooks with their own
(``live_hooks.STRATEGY_HOOKS``: while at least one strategy lives).

Example:
    class MyFrontEnd:
        name = "my_library"
        def on_scope_entry(self, strategy): ...   # check the library once, patch its seam
        def install(self): return lambda: None           # torch hooks while strategies live; the remover
    front_end.register(MyFrontEnd())          # from multidev.distribute import front_end
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

from multidev.distribute import live_hooks


@runtime_checkable
class FrontEnd(Protocol):
    """What a strategy needs from a front end."""

    name: str

    def on_scope_entry(self, strategy: Any) -> None:
        """Called with the strategy on every ``strategy.scope()`` entry; keep it cheap (a flag check
        after the first call)."""

    def install(self) -> Callable[[], None]:
        """Register the front end's torch hooks; returns how to remove them. Called when the first
        strategy is created (or at ``register`` while one lives); the remover when the last is freed."""


_REGISTERED: list[FrontEnd] = []


def register(front_end: FrontEnd) -> None:
    """Join ``front_end`` to every strategy (idempotent for the same object)."""
    if not isinstance(front_end, FrontEnd):
        raise TypeError(f"front_end.register needs an object with name, on_scope_entry(strategy) "
                        f"and install() -> remover (the FrontEnd protocol), got {front_end!r}.")
    if any(f is front_end for f in _REGISTERED):
        return
    _REGISTERED.append(front_end)
    live_hooks.STRATEGY_HOOKS.add(front_end.install)


def on_scope_entry(strategy: Any) -> None:
    """Tell every registered front end that ``strategy``'s scope is being entered."""
    for front_end in _REGISTERED:
        front_end.on_scope_entry(strategy)


def registered() -> tuple[FrontEnd, ...]:
    return tuple(_REGISTERED)
