"""Run-time placement options: soft device placement and the device policy.

Unlike the device configuration these may change at any time. Soft placement is process-wide
(on by default, as in TensorFlow's eager mode); the device policy is per thread, as in
TensorFlow: a thread that never set one uses the default, 'silent'. (It is a context variable:
a new thread starts without one; replicas of ``strategy.run`` get their caller's.)
"""

from __future__ import annotations

import contextlib
import contextvars

DEVICE_POLICIES = ("silent", "silent_for_int32", "warn", "explicit")
DEFAULT_DEVICE_POLICY = "silent"

_soft_placement = True
_policy: contextvars.ContextVar[str | None] = contextvars.ContextVar("multidev_device_policy", default=None)


def set_soft_device_placement(enabled: bool) -> None:
    """Run ops on an existing device when the requested one does not exist (or lacks a kernel).

    Example:
        >>> md.config.set_soft_device_placement(False)  # '/GPU:7' now raises RuntimeError
    """
    global _soft_placement
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}.")
    _soft_placement = enabled


def get_soft_device_placement() -> bool:
    """Whether soft device placement is on (default True)."""
    return _soft_placement


def _check_policy(device_policy: str | None) -> None:
    if device_policy is not None and device_policy not in DEVICE_POLICIES:
        raise ValueError(
            f"Not a valid device policy: {device_policy!r}; valid policies: {list(DEVICE_POLICIES)} or None "
            "(None restores the default, 'silent')."
        )


def set_device_policy(device_policy: str | None) -> None:
    """Set this thread's policy for inputs that live on another device than the op.

    Args:
        device_policy: 'silent' (copy them, the default), 'silent_for_int32' (copy int32 tensors
            only, raise for others), 'warn' (copy and log a warning), 'explicit' (raise), or None
            to go back to the default.

    Raises:
        ValueError: any other value.
    """
    _check_policy(device_policy)
    _policy.set(device_policy)


def get_device_policy() -> str:
    """This thread's device policy ('silent' unless set in this thread)."""
    policy = _policy.get()
    return DEFAULT_DEVICE_POLICY if policy is None else policy


@contextlib.contextmanager
def device_policy_scope(device_policy: str | None):
    """Run the block under ``device_policy`` (e.g. a replica under its caller's), then restore the previous one."""
    _check_policy(device_policy)
    token = _policy.set(device_policy)
    try:
        yield
    finally:
        _policy.reset(token)


__all__ = [
    "DEVICE_POLICIES",
    "device_policy_scope",
    "set_soft_device_placement",
    "get_soft_device_placement",
    "set_device_policy",
    "get_device_policy",
]
