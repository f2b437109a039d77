"""Memory accounting: per-logical-GPU limits, and ``md.config.experimental.get_memory_info``.

Several logical GPUs share one physical GPU and one torch caching allocator, so the allocator
cannot tell them apart. The placement mode therefore reports every tensor an op creates on a
limited logical GPU to :func:`track`; it counts live storage bytes per logical device (a
storage shared by views counts once, and is released when its last tracked tensor dies) and
raises an out-of-memory error naming the logical device when a new storage would pass the limit.

CPU devices raise ``ValueError`` from ``get_memory_info``, as TensorFlow does: neither torch
nor TensorFlow keeps allocator statistics for the CPU.
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch.utils._pytree import tree_leaves

from multidev._core.errors import ResourceExhaustedError
from multidev.devices import registry
from multidev.devices.registry import Device
from multidev.devices.spec import DeviceSpec


class _Usage:
    """Live bytes of one limited logical device."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current = 0
        self.peak = 0
        self.live: dict[int, list[int]] = {}  # storage data_ptr -> [nbytes, tracked tensors]

    def release(self, ptr: int) -> None:
        with self.lock:
            entry = self.live.get(ptr)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self.live[ptr]
                self.current -= entry[0]


_usage: dict[str, _Usage] = {}
_usage_lock = threading.Lock()


def _usage_of(device: Device) -> _Usage:
    with _usage_lock:
        usage = _usage.get(device.name)
        if usage is None:
            usage = _usage[device.name] = _Usage()
        return usage


def _oom(device: Device, usage: _Usage, extra: int) -> ResourceExhaustedError:
    mb = 1024 * 1024
    return ResourceExhaustedError(
        f"OOM when allocating {extra} bytes on {device.name}: the logical device has "
        f"{usage.current} of its memory_limit={device.memory_limit // mb} MB in use. Free tensors "
        "placed on it, use smaller batches, or give it a larger LogicalDeviceConfiguration(memory_limit=...)."
    )


def track(device: Device, outputs: object) -> None:
    """Count the storages of the tensors in ``outputs`` against ``device``'s memory limit.

    Raises:
        ResourceExhaustedError: the new storages would pass the limit (nothing is counted then).
    """
    if device.memory_limit is None:
        return
    usage = _usage_of(device)
    tensors = [t for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.device == device.torch_device]
    with usage.lock:
        new: dict[int, int] = {}
        for t in tensors:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr and ptr not in usage.live:
                new[ptr] = storage.nbytes()
        extra = sum(new.values())
        if usage.current + extra > device.memory_limit:
            raise _oom(device, usage, extra)
        for ptr, nbytes in new.items():
            usage.live[ptr] = [nbytes, 0]
        usage.current += extra
        usage.peak = max(usage.peak, usage.current)
        for t in tensors:
            ptr = t.untyped_storage().data_ptr()
            if ptr in usage.live:
                usage.live[ptr][1] += 1
                weakref.finalize(t, usage.release, ptr)


def _gpu_device(device: str) -> Device | None:
    """The GPU logical device named ``device``; None for a CPU (TF 2.21 keeps no CPU statistics and
    reports zeros, although its docstring says CPUs raise)."""
    if not isinstance(device, str):
        raise TypeError(f"device must be a device name such as 'GPU:0', got {device!r}.")
    if device == "":
        return None  # TF 2.21: the empty name is the default device and reports zeros
    spec = DeviceSpec.from_string(device)
    if spec.device_type is None or spec.device_index is None:
        raise ValueError(f"Failed parsing device name: {device!r}. A device name needs a device type and an index, "
                         f"like 'GPU:0' or '/device:CPU:0'; valid names: "
                         f"{[d.name for d in registry.logical_devices()]}.")
    resolved = registry.lookup(device)
    return resolved if resolved.device_type == "GPU" else None


def get_memory_info(device: str) -> dict[str, int]:
    """Current and peak memory, in bytes, used by tensors on a GPU logical device.

    A CPU reports ``{'current': 0, 'peak': 0}`` as TensorFlow 2.21 does (no statistics are kept
    for it; for the process's memory use ``resource.getrusage`` or psutil).

    Example:
        >>> md.config.experimental.get_memory_info("GPU:0")
        {'current': 0, 'peak': 0}

    Raises:
        ValueError: the device does not exist.
    """
    resolved = _gpu_device(device)
    if resolved is None:
        return {"current": 0, "peak": 0}
    if resolved.memory_limit is not None:
        usage = _usage_of(resolved)
        with usage.lock:
            return {"current": usage.current, "peak": usage.peak}
    index = resolved.physical_index
    return {"current": torch.cuda.memory_allocated(index), "peak": torch.cuda.max_memory_allocated(index)}


def get_memory_usage(device: str) -> int:
    """``get_memory_info(device)['current']`` (TensorFlow's deprecated spelling)."""
    return get_memory_info(device)["current"]


def reset_memory_stats(device: str) -> None:
    """Reset the peak reported by :func:`get_memory_info` to the current usage (a CPU: nothing to reset)."""
    resolved = _gpu_device(device)
    if resolved is None:
        return
    if resolved.memory_limit is not None:
        usage = _usage_of(resolved)
        with usage.lock:
            usage.peak = usage.current
        return
    torch.cuda.reset_peak_memory_stats(resolved.physical_index)


__all__ = ["track", "get_memory_info", "get_memory_usage", "reset_memory_stats"]
