"""Shared 'monitor a logged quantity' logic: mode (min/max/auto) and improvement tests."""

from __future__ import annotations

import math

from multidev._core.user_warnings import warn_user

_MODES = ("auto", "min", "max")


_MAXIMISED = ("acc", "auc", "precision", "recall", "fmeasure")


def resolve_mode(mode: str, monitor: str, owner: str) -> str:
    """'min' or 'max' for ``monitor`` from its name (auto: accuracy/AUC/precision/recall are maximised);
    ``settle_mode`` refines an auto mode once the model's metrics exist."""
    if mode not in _MODES:
        warn_user(f"{owner} mode {mode!r} is unknown, fallback to auto mode. Valid modes: {list(_MODES)}.")
        mode = "auto"
    if mode != "auto":
        return mode
    return "max" if any(k in monitor for k in _MAXIMISED) and "loss" not in monitor else "min"


def settle_mode(mode: str, monitor: str, model, owner: str) -> str:
    """Keras 3's ``mode="auto"``, decided at a callback's first epoch end (the compiled metrics are built
    by then): a loss is minimised; a compiled metric named ``monitor`` (without ``val_``) goes its
    ``_direction`` ('up': max, as Keras 3's F1Score, R2Score, AUC...); else accuracy/AUC/precision/recall
    in the name mean max. Any other name raises ValueError, as Keras 3 does: guessing 'min' would stop,
    checkpoint or cut the rate on the wrong epochs for a metric that should grow.
    """
    if mode != "auto":
        return mode
    name = monitor[4:] if monitor.startswith("val_") else monitor
    if "loss" in name:
        return "min"
    for metric in (getattr(model, "metrics", None) or []):
        direction = getattr(metric, "_direction", None)
        if getattr(metric, "name", None) == name and direction in ("up", "down"):
            return "max" if direction == "up" else "min"
    if any(k in name for k in _MAXIMISED):
        return "max"
    raise ValueError(
        f"{owner} callback received monitor={monitor!r}, but it cannot determine whether that metric should be "
        "maximized or minimized (no compiled metric of that name declares a `_direction`). Pass mode='max' to "
        "monitor the highest value, or mode='min' for the lowest."
    )


def is_improvement(current, reference, mode: str, min_delta: float = 0.0) -> bool:
    """Whether ``current`` beats ``reference`` by more than ``min_delta`` in direction ``mode``."""
    if reference is None:
        return True
    if mode == "min":
        return current < reference - abs(min_delta)
    return current > reference + abs(min_delta)


_MISSING = {   # Keras 3's warnings, word for word (programs and tests grep them)
    "Early stopping": "Early stopping conditioned on metric `{monitor}` which is not available. Available metrics "
                      "are: {available}",
    "ModelCheckpoint": "Can save best model only with {monitor} available.",
}


def get_monitor_value(logs, monitor, owner):
    """The monitored value from ``logs`` or None, warning as Keras 3 does (the logs' keys in their order)."""
    value = (logs or {}).get(monitor)
    if value is None:
        template = _MISSING.get(owner, "{owner} is conditioned on metric `{monitor}` which is not available. "
                                       "Available metrics are: {available}")
        warn_user(template.format(owner=owner, monitor=monitor, available=",".join(logs or {})))
        return None
    value = float(value)
    return None if math.isnan(value) else value
