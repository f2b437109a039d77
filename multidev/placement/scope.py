"""Device scopes: ``md.device(name)`` for users, ``device_scope(device)`` for strategies.

A scope pushes an entry on this thread's scope stack (so partial names nest and merge) and,
when it has to, a :class:`PlacementMode`. It has to when ops could otherwise run elsewhere or
go unlogged: placement logging is on, the device is not the CPU, an outer scope installed a
mode, or (for ``md.device`` only) the machine has GPUs whose tensors could flow in. On a CPU
with logging off a scope is a couple of list operations, cheap enough for every replica step.
"""

from __future__ import annotations

from typing import Any

import torch

from multidev.devices import context, registry
from multidev.devices.physical import LogicalDevice, PhysicalDevice
from multidev.devices.registry import Device
from multidev.devices.spec import DeviceSpec
from multidev.placement import log
from multidev.placement.mode import PlacementMode


def _needs_mode(device: Device, *, any_gpu_counts: bool) -> bool:
    if log.enabled() or device.torch_device.type != "cpu" or context.innermost_mode() is not None:
        return True
    return any_gpu_counts and bool(registry.logical_devices("GPU"))


def _spec_for(name: Any) -> DeviceSpec:
    """The (unmerged) spec a scope argument stands for."""
    if isinstance(name, str):
        return DeviceSpec.from_string(name)
    if isinstance(name, DeviceSpec):
        return name
    if isinstance(name, LogicalDevice):
        return DeviceSpec.from_string(name.name)
    if isinstance(name, Device):
        return name.spec
    if isinstance(name, torch.device):
        return registry.resolve(name).spec
    if isinstance(name, PhysicalDevice):
        raise TypeError(
            f"md.device got the physical device {name!r}: ops run on logical devices; use "
            "md.config.list_logical_devices() (e.g. md.device(logical.name))."
        )
    raise TypeError(
        f"md.device expects a device name such as '/GPU:0' or 'cpu:0', a DeviceSpec, a LogicalDevice "
        f"or a torch.device, got {type(name).__name__} {name!r}."
    )


class _Scope:
    """A re-usable, non-reentrant context manager for one device scope."""

    def __init__(self, spec: DeviceSpec | None, device: Device | None, any_gpu_counts: bool) -> None:
        self._spec = spec
        self._device = device
        self._any_gpu_counts = any_gpu_counts
        self._entry: tuple | None = None   # (ScopeEntry, token) while entered

    def __enter__(self) -> Device:
        if self._entry is not None:
            raise RuntimeError("This device scope is already entered; create a new md.device(...) to nest.")
        if self._device is not None:
            device, spec = self._device, self._device.spec
        else:
            spec = registry.merge_with_scope(self._spec)
            device = registry.resolve_merged(spec)
        mode = PlacementMode(device) if _needs_mode(device, any_gpu_counts=self._any_gpu_counts) else None
        entry = context.ScopeEntry(spec=spec, device=device, mode=mode)
        token = context.push(entry)
        if mode is not None:
            try:
                mode.__enter__()
            except BaseException:
                context.pop(entry, token)
                raise
        self._entry = entry, token
        return device

    def __exit__(self, exc_type, exc, tb) -> None:
        entered, self._entry = self._entry, None
        if entered is None:
            raise RuntimeError("Device scope exited without being entered.")
        entry, token = entered
        try:
            if entry.mode is not None:
                entry.mode.__exit__(exc_type, exc, tb)
        finally:
            context.pop(entry, token)


def device(name: "str | DeviceSpec | LogicalDevice | Device | torch.device | None") -> _Scope:
    """Place the ops and tensors created in a ``with`` block on a device (``tf.device``).

    Nested scopes merge field by field (``/job:localhost`` then ``GPU:1``). ``None`` clears the
    outer scopes' device (ops go to the default device, the CPU). Entering the scope initializes
    the device registry, freezing the configuration.

    Example:
        >>> with md.device("/CPU:0"):
        ...     a = torch.ones(2, 3)
        ...     b = a @ torch.ones(3, 2)

    Raises:
        TypeError / ValueError: ``name`` is not a device name (the message quotes it).
        md.errors.UnknownDeviceError: ``"<name> unknown device."`` (an InvalidArgumentError, as TF 2.21
            raises, and a RuntimeError, as the GPU guide catches) when the device does not exist and soft
            device placement is off.
    """
    if name is None:
        return _Scope(None, registry.logical_devices("CPU")[0], any_gpu_counts=True)
    if isinstance(name, Device):
        return _Scope(None, registry.resolve(name), any_gpu_counts=True)
    return _Scope(_spec_for(name), None, any_gpu_counts=True)


def device_scope(device: Device) -> _Scope:
    """The scope strategies enter in each replica thread: no parsing, no mode on a quiet CPU."""
    if not isinstance(device, Device):
        raise TypeError(f"device_scope expects a registry.Device (from registry.resolve), got {device!r}.")
    return _Scope(None, device, any_gpu_counts=False)


def current_device() -> Device | None:
    """The device of this thread's innermost scope, or None outside every scope."""
    entry = context.innermost()
    return None if entry is None else entry.device


__all__ = ["device", "device_scope", "current_device"]
