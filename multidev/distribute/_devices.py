"""Turning a strategy's ``devices=`` argument into registry devices, with clear errors."""

from __future__ import annotations

from typing import Any, Sequence

from multidev.devices import registry
from multidev.devices.physical import LogicalDevice


class DuplicateDevicesError(ValueError, AssertionError):
    """A device named twice: a ``ValueError``, and the ``AssertionError`` TensorFlow's strategies
    raise, so programs written for either catch it."""


def resolve_devices(devices: Any, argument: str) -> list[registry.Device]:
    """Resolve a list of device names; rejects empty lists, bare strings and duplicates."""
    if isinstance(devices, (str, registry.Device)):
        raise TypeError(
            f"`{argument}` must be a list of device names, got the single device {devices!r}. "
            f"Hint: {argument}=[{str(devices)!r}]."
        )
    if not isinstance(devices, Sequence) or len(devices) == 0:
        raise ValueError(f"`{argument}` must be a non-empty list of device names, got {devices!r}.")
    resolved = [_strict(d, argument) for d in devices]
    names = [d.name for d in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DuplicateDevicesError(
            f"No duplicates allowed in `{argument}` argument: {list(devices)!r} names {duplicates} twice.")
    return resolved


def _strict(device: Any, argument: str) -> registry.Device:
    """A strategy's devices must exist: soft placement would silently put two replicas on one."""
    if isinstance(device, registry.Device):
        return registry.resolve(device)
    if isinstance(device, LogicalDevice):   # the GPU guide: MirroredStrategy(md.config.list_logical_devices("GPU"))
        device = device.name
    try:
        return registry.lookup(device)
    except ValueError as exc:
        raise ValueError(
            f"{exc} Every device in `{argument}` must exist. To run several replicas on one CPU, split it "
            "first: md.config.set_logical_device_configuration(md.config.list_physical_devices('CPU')[0], "
            "[md.config.LogicalDeviceConfiguration()] * 2)."
        ) from None


def default_devices() -> list[registry.Device]:
    """TensorFlow's default for MirroredStrategy: every logical GPU, else every logical CPU
    (one CPU unless it was split into logical devices; TF 2.21 gives 2 replicas after a split in two)."""
    gpus = registry.logical_devices("GPU")
    return gpus if gpus else registry.logical_devices("CPU")
