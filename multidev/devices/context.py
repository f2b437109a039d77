"""The stack of device scopes entered by the running code.

It lives in the devices layer because :func:`multidev.devices.registry.resolve` merges partial
names with the innermost scope; :mod:`multidev.placement` pushes and pops the entries. The stack
is an immutable tuple in a context variable: each thread starts with an empty one (a new
``threading.Thread`` does not inherit its creator's scopes), and strategies run each replica in
its own thread, each in its own scope.
"""

from __future__ import annotations

import contextvars
from typing import Any, NamedTuple

from multidev.devices.spec import DeviceSpec


class ScopeEntry(NamedTuple):
    """One active device scope: the merged spec, the device it resolved to, its mode (or None)."""

    spec: DeviceSpec
    device: Any  # registry.Device (not imported here to keep this module at the bottom)
    mode: Any = None  # the TorchFunctionMode the scope installed, if any


_stack: contextvars.ContextVar[tuple[ScopeEntry, ...]] = contextvars.ContextVar("multidev_device_scopes", default=())


def push(entry: ScopeEntry) -> contextvars.Token:
    """Enter a scope; pass the returned token to :func:`pop`."""
    return _stack.set(_stack.get() + (entry,))


def pop(entry: ScopeEntry, token: contextvars.Token) -> None:
    """Leave the innermost scope, which must be ``entry`` (scopes nest strictly)."""
    stack = _stack.get()
    if not stack or stack[-1] is not entry:
        raise RuntimeError(
            "Device scopes exited out of order: each `with md.device(...)` must exit before the "
            "scope around it (do not keep scopes open across threads or generators)."
        )
    try:
        _stack.reset(token)
    except ValueError:   # entered in another context (e.g. before an asyncio task copied it)
        _stack.set(stack[:-1])


def innermost() -> ScopeEntry | None:
    """The innermost scope, or None outside every scope."""
    stack = _stack.get()
    return stack[-1] if stack else None


def innermost_mode() -> Any:
    """The mode of the innermost scope that installed one, or None."""
    for entry in reversed(_stack.get()):
        if entry.mode is not None:
            return entry.mode
    return None


__all__ = ["ScopeEntry", "push", "pop", "innermost", "innermost_mode"]
