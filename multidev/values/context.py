"""Distribution state of the running code: the replica it runs as and the strategy scopes entered.

Everything a replica needs to know about itself is one immutable :class:`ReplicaEnv`, held in one
``contextvars.ContextVar``: set once when a replica's task starts (``StrategyExtended._replica_task``)
and reset with its token when the task ends. Outside replicas (and in ``merge_call``) it is None.
``current_replica_id()`` is one ``ContextVar.get`` and one attribute read: it sits on the hot path
of every mirrored-parameter access.

A new ``threading.Thread`` starts with an empty context, so a thread started inside a replica
function (or inside a strategy scope) sees neither, as with TensorFlow's thread-local scopes.

Example:
    >>> def fn():
    ...     env = replica_env()
    ...     return env.replica_id, env.device.name
    >>> strategy.run(fn)
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass
from typing import Any, Iterable

import torch

from multidev._core.enums import ReduceOp
from multidev.devices import options as device_options
from multidev.values.gradients import LocalGrads


@dataclass(frozen=True, slots=True)
class CallerModes:
    """The per-thread modes of the code calling ``strategy.run``, which every replica runs under:
    autograd (``with torch.no_grad(): strategy.run(...)``), autocast per device type
    (``with torch.autocast("cpu"): ...``) and the device policy
    (``md.config.experimental.set_device_policy("explicit")``). Placement logging and soft
    placement are process-wide, so replicas see them without being told."""

    grad_enabled: bool = True
    autocast: tuple[tuple[str, torch.dtype], ...] = ()   # (device type, dtype) for each type enabled
    device_policy: str | None = None                      # None: the default ('silent')

    @classmethod
    def capture(cls, device_types: Iterable[str]) -> "CallerModes":
        """The calling thread's modes, for replicas on devices of ``device_types``."""
        autocast = tuple((t, torch.get_autocast_dtype(t)) for t in sorted(set(device_types))
                         if torch.is_autocast_enabled(t))
        return cls(torch.is_grad_enabled(), autocast, device_options.get_device_policy())

    def applied(self, device_type: str) -> contextlib.ExitStack:
        """A context running the block under these modes (on a replica of ``device_type``)."""
        stack = contextlib.ExitStack()
        stack.enter_context(torch.set_grad_enabled(self.grad_enabled))
        stack.enter_context(device_options.device_policy_scope(self.device_policy))
        for t, dtype in self.autocast:
            if t == device_type:
                stack.enter_context(torch.autocast(device_type, dtype=dtype))
        return stack


class ReplicaStep:
    """What one replica's step did that decides how its gradients combine; one per replica per
    ``strategy.run``, so every step starts fresh.

    ``loss_reduction``: MEAN (a PyTorch loop: torch losses are means, so gradients are averaged as
    DDP does) until a loss scaled for distribution (``md.nn.compute_average_loss``, an md.keras mean
    loss in ``strategy.run``) calls ``mark_loss_scaled``, which makes it SUM (TensorFlow's rule).
    ``gradients``: the type of what ``p.grad`` holds (``values.gradients``): ``LocalGrads`` until
    ``loss.backward()`` reduced them (``SummedGrads``: an optimizer step applies them as they are).
    """

    __slots__ = ("loss_reduction", "gradients")

    def __init__(self) -> None:
        self.loss_reduction = ReduceOp.MEAN
        self.gradients: type = LocalGrads


@dataclass(frozen=True, slots=True)
class ReplicaEnv:
    """What the running replica is: set once per replica task, never mutated.

    ``replica_id`` is the LOCAL index (a distributed variable's components are indexed by it);
    ``replica_context.replica_id_in_sync_group`` is the global one. ``step`` carries per-call
    inputs handed to ``extended.call_for_each_replica(..., step=...)`` (Keras's ``StepInputs``), else None.
    Hot paths read it with ``replica_env()`` (the ContextVar's own ``get``, no Python call).
    """

    strategy: Any
    replica_context: Any
    replica_id: int
    device: Any                    # devices.registry.Device
    stream: Any = None             # the replica's CUDA stream, or None
    modes: CallerModes = CallerModes()
    step: Any = None
    replica_step: ReplicaStep | None = None   # this replica's mutable per-step notes (see ReplicaStep)
    num_replicas_in_sync: int = 1  # the strategy's, read once per run (every worker's replicas)


_ENV: contextvars.ContextVar[ReplicaEnv | None] = contextvars.ContextVar("multidev_replica_env", default=None)
_SCOPES: contextvars.ContextVar[tuple] = contextvars.ContextVar("multidev_strategy_scopes", default=())
_get_env = _ENV.get

#: ``replica_env() -> ReplicaEnv | None``: the running replica's environment, or None in cross-replica
#: context (the ContextVar's own ``get``: hot paths call it per parameter access).
replica_env = _ENV.get


def mark_loss_scaled() -> None:
    """In a replica: this step's loss is already scaled for distribution, so ``loss.backward()`` sums
    the replicas' gradients instead of averaging them (no-op outside a replica)."""
    env = _ENV.get()
    if env is not None and env.replica_step is not None:
        env.replica_step.loss_reduction = ReduceOp.SUM


def current_replica_id() -> int | None:
    """The local replica id of the replica function running here, or None (cross-replica)."""
    env = _get_env()
    return None if env is None else env.replica_id


def current_replica_context() -> Any | None:
    """The ``ReplicaContext`` of the running replica, or None when in cross-replica context."""
    env = _get_env()
    return None if env is None else env.replica_context


class _TracedReplica(threading.local):
    """The running replica's local id, mirrored from ``_ENV`` for code that ``torch.compile`` traces:
    dynamo cannot trace ``ContextVar.get`` (a graph break at every parameter access), but it reads
    a ``threading.local`` attribute and guards on its value, so a compiled module is specialised per
    replica. The one ``threading.local`` here; ``_ENV`` stays the truth (set and reset with it)."""

    replica_id: int | None = None


_traced = _TracedReplica()


def traced_replica_id() -> int | None:
    """``current_replica_id()`` for code run under ``torch.compile`` (see ``_TracedReplica``)."""
    return _traced.replica_id


def _mirror() -> None:
    env = _ENV.get()
    _traced.replica_id = None if env is None else env.replica_id


def enter_replica_env(env: ReplicaEnv | None) -> contextvars.Token:
    """Run as ``env`` (None: cross-replica) until ``exit_replica_env`` with the returned token."""
    token = _ENV.set(env)
    _mirror()
    return token


def exit_replica_env(token: contextvars.Token) -> None:
    _ENV.reset(token)
    _mirror()


@contextlib.contextmanager
def cross_replica(strategy: Any = None):
    """Leave replica context for the block (``merge_call``, restoring a variable made in a replica);
    with ``strategy``, the block is also in its scope."""
    token = _ENV.set(None)
    _mirror()
    pushed = push_scope(strategy) if strategy is not None else None
    try:
        yield
    finally:
        if pushed is not None:
            pop_scope(pushed)
        _ENV.reset(token)
        _mirror()


def scope_stack() -> tuple:
    """The strategies whose ``scope()`` is entered here, innermost last."""
    return _SCOPES.get()


def push_scope(strategy: Any) -> tuple:
    """Enter ``strategy``'s scope; pass the result to ``pop_scope``."""
    stack = _SCOPES.get() + (strategy,)
    return _SCOPES.set(stack), stack


def pop_scope(pushed: tuple) -> None:
    """Leave the scope ``push_scope`` entered, which must be the innermost one."""
    token, stack = pushed
    if _SCOPES.get() is not stack:
        raise RuntimeError("strategy.scope() exited out of order (scopes must nest, and exit in the thread "
                           "that entered them).")
    try:
        _SCOPES.reset(token)
    except ValueError:   # entered in another context (e.g. before an asyncio task copied it)
        _SCOPES.set(stack[:-1])


def current_scope_strategy() -> Any | None:
    """The innermost strategy in scope here (replicas see their run's strategy)."""
    env = _get_env()
    if env is not None:
        return env.strategy
    stack = _SCOPES.get()
    return stack[-1] if stack else None


__all__ = ["CallerModes", "ReplicaStep", "ReplicaEnv", "replica_env", "current_replica_id", "traced_replica_id",
           "current_replica_context", "mark_loss_scaled",
           "enter_replica_env", "exit_replica_env", "cross_replica", "scope_stack", "push_scope", "pop_scope",
           "current_scope_strategy"]
