"""Run-time placement options: soft device placement and the device policy.

Unlike the device configuration these may change at any time. Soft placement is process-wide
(on by default, as in TensorFlow's eager mode); the device policy is per thread, as in
TensorFlow: a thread that never set one uses the default, 'silent'.
"""

from __future__ import annotations

import contextlib
import threading

DEVICE_POLICIES = ("silent", "silent_for_int32", "warn", "explicit")
DEFAULT_DEVICE_POLICY = "silent"

_soft_placement = True
_thread = threading.local()


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


def set_device_policy(device_policy: str | None) -> None:
    """Set this thread's policy for inputs that live on another device than the op.

    Args:
        device_policy: 'silent' (copy them, the default), 'silent_for_int32' (copy int32 tensors
            only, raise for others), 'warn' (copy and log a warning), 'explicit' (raise), or None
            to go back to the default.

    Raises:
        ValueError: any other value.
    """
    if device_policy is not None and device_policy not in DEVICE_POLICIES:
        raise ValueError(
            f"Not a valid device policy: {device_policy!r}; valid policies: {list(DEVICE_POLICIES)} or None "
            "(None restores the default, 'silent')."
        )
    _thread.policy = device_policy


def get_device_policy() -> str:
    """This thread's device policy ('silent' unless set in this thread)."""
    policy = getattr(_thread, "policy", None)
    return DEFAULT_DEVICE_POLICY if policy is None else policy


@contextlib.contextmanager
def device_policy_scope(device_policy: str | None):
    """Run this thread under ``device_policy`` (e.g. a replica thread under its caller's), then restore it."""
    previous = getattr(_thread, "policy", None)
    _thread.policy = device_policy
    try:
        yield
    finally:
        _thread.policy = previous


__all__ = [
    "DEVICE_POLICIES",
    "device_policy_scope",
    "set_soft_device_placement",
    "get_soft_device_placement",
    "set_device_policy",
    "get_device_policy",
]
