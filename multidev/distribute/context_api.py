"""Module-level functions: ``get_strategy``, ``has_strategy``, ``get_replica_context``,
``in_cross_replica_context``, and the default strategy used outside any scope."""

from __future__ import annotations

import contextvars
from typing import Any, Callable, final


from multidev.devices import registry
from multidev.distribute.distribute_lib import ReplicatedExtended
from multidev.distribute.extended import StrategyExtended
from multidev.distribute.replica_context import ReplicaContext
from multidev.distribute.strategy import Strategy
from multidev.distribute.variable_layout import PlainLayout
from multidev.values import context


@final
class _DefaultExtended(ReplicatedExtended):
    """One replica on the default device; variables stay plain."""

    def __init__(self, strategy: Strategy, device: registry.Device):
        super().__init__(strategy, [device], None, layout=PlainLayout())

    def _call_for_each_replica(self, fn: Callable, args: tuple, kwargs: dict, step: Any = None) -> Any:
        return fn(*args, **kwargs)   # no replicas: nothing to hand ``step`` to (one device sees the whole batch)


class _DefaultStrategy(Strategy):
    """The strategy in effect outside any ``scope()``: no distribution at all."""

    def __init__(self) -> None:   # the extended is built on first use: not at import (devices would initialise)
        self._lazy_extended: StrategyExtended | None = None

    @property
    def _extended(self) -> StrategyExtended:
        if self._lazy_extended is None:
            self._lazy_extended = _DefaultExtended(self, registry.resolve("/device:CPU:0"))
        return self._lazy_extended

    @property
    def num_replicas_in_sync(self) -> int:
        return 1

    def run(self, fn, args=(), kwargs=None, options=None):
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"strategy.run: args must be a tuple or list, got {type(args).__name__}: {args!r}.")
        return fn(*args, **(kwargs or {}))

    def scope(self):
        return _NullScope(self)


class _NullScope:
    def __init__(self, strategy: Strategy):
        self._strategy = strategy

    def __enter__(self) -> Strategy:
        return self._strategy

    def __exit__(self, *exc: Any) -> None:
        return None


class _DefaultReplicaContext(ReplicaContext):
    """Replica context of the default strategy: collectives are identities."""

    def all_reduce(self, reduce_op, value, options=None):
        return value

    def all_gather(self, value, axis, options=None):
        return value

    def merge_call(self, merge_fn, args=(), kwargs=None):
        """Runs ``merge_fn(strategy, ...)`` in cross-replica context, as TensorFlow's default
        replica context does (``in_cross_replica_context()`` is True inside)."""
        token = _DEFAULT_CROSS_REPLICA.set(True)
        try:
            return merge_fn(self._strategy, *args, **(kwargs or {}))
        finally:
            _DEFAULT_CROSS_REPLICA.reset(token)

    @property
    def num_replicas_in_sync(self) -> int:
        return 1

    @property
    def devices(self) -> tuple[str, ...]:
        return ("/job:localhost/replica:0/task:0/device:CPU:0",)


# True inside the default replica context's merge_call: cross-replica context of the default strategy.
_DEFAULT_CROSS_REPLICA: contextvars.ContextVar[bool] = contextvars.ContextVar("multidev_default_cross_replica",
                                                                             default=False)
_DEFAULT_STRATEGY = _DefaultStrategy()
_DEFAULT_REPLICA_CONTEXT = _DefaultReplicaContext(_DEFAULT_STRATEGY, 0)


def get_strategy() -> Strategy:
    """The strategy in scope (or of the running replica), else the default strategy."""
    return context.current_scope_strategy() or _DEFAULT_STRATEGY


def has_strategy() -> bool:
    """Whether a non-default strategy is in scope."""
    return context.current_scope_strategy() is not None


def get_replica_context() -> ReplicaContext | None:
    """The replica context inside ``strategy.run``; None in cross-replica context (inside a scope);
    the default replica context outside any strategy."""
    ctx = context.current_replica_context()
    if ctx is not None:
        return ctx
    if context.current_scope_strategy() is not None or _DEFAULT_CROSS_REPLICA.get():
        return None
    return _DEFAULT_REPLICA_CONTEXT


def in_cross_replica_context() -> bool:
    """True inside a strategy's ``scope()`` but outside ``strategy.run``."""
    if context.current_replica_context() is not None:
        return False
    return context.current_scope_strategy() is not None or _DEFAULT_CROSS_REPLICA.get()


def get_cross_replica_context() -> Strategy | None:
    return get_strategy() if in_cross_replica_context() or not has_strategy() else None
