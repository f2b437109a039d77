"""``md.distribute.experimental_set_strategy``: a strategy in scope without a ``with`` block.

As TensorFlow: the strategy's scope is entered for the calling thread (the main program) until
the next call; ``None`` leaves it. Calling it inside a strategy's ``scope()`` raises RuntimeError.
"""

from __future__ import annotations

from typing import Any

from multidev.distribute.context_api import has_strategy

_global_scope: Any = None


def experimental_set_strategy(strategy) -> None:
    """Enter ``strategy.scope()`` globally (replacing a previously set strategy); ``None`` leaves it.

    Raises:
        RuntimeError: called inside a ``with strategy.scope():`` block.
        TypeError: ``strategy`` is neither a strategy nor None.

    Example:
        >>> md.distribute.experimental_set_strategy(md.distribute.MirroredStrategy())
        >>> md.distribute.get_strategy()          # the MirroredStrategy, without `with`
        >>> md.distribute.experimental_set_strategy(None)
    """
    from multidev.distribute.strategy import Strategy

    global _global_scope
    if strategy is not None and not isinstance(strategy, Strategy):
        raise TypeError(f"experimental_set_strategy expects an md.distribute.Strategy or None, got {strategy!r} "
                        f"of type {type(strategy).__name__}.")
    if _global_scope is not None:
        scope, _global_scope = _global_scope, None
        scope.__exit__(None, None, None)
    if has_strategy():
        raise RuntimeError("Must not be called inside a `md.distribute.Strategy` scope: leave the "
                           "`with strategy.scope():` block first.")
    if strategy is not None:
        scope = strategy.scope()
        scope.__enter__()
        _global_scope = scope
