"""Shared 'monitor a logged quantity' logic: mode (min/max/auto) and improvement tests."""

from __future__ import annotations

import math

from multidev._core.user_warnings import warn_user

_MODES = ("auto", "min", "max")


def resolve_mode(mode: str, monitor: str, owner: str) -> str:
    """'min' or 'max' for ``monitor`` (auto: accuracy/AUC/precision/recall are maximised)."""
    if mode not in _MODES:
        warn_user(f"{owner} mode {mode!r} is unknown, fallback to auto mode. Valid modes: {list(_MODES)}.")
        mode = "auto"
    if mode != "auto":
        return mode
    maximise = ("acc", "auc", "precision", "recall", "fmeasure")
    return "max" if any(k in monitor for k in maximise) and "loss" not in monitor else "min"


def is_improvement(current, reference, mode: str, min_delta: float = 0.0) -> bool:
    """Whether ``current`` beats ``reference`` by more than ``min_delta`` in direction ``mode``."""
    if reference is None:
        return True
    if mode == "min":
        return current < reference - abs(min_delta)
    return current > reference + abs(min_delta)


def get_monitor_value(logs, monitor, owner):
    """The monitored value from ``logs`` or None (with a warning listing the available keys)."""
    value = (logs or {}).get(monitor)
    if value is None:
        warn_user(f"{owner} is conditioned on metric `{monitor}` which is not available. Available metrics "
                  f"are: {','.join(sorted(logs or {}))}")
        return None
    value = float(value)
    return None if math.isnan(value) else value
