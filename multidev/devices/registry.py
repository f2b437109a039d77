"""The registry of logical devices: built once from the configuration, then frozen.

``resolve`` is the one place where a device name (string, ``DeviceSpec``, ``Device``,
``LogicalDevice`` or ``torch.device``) becomes a :class:`Device`.

Example:
    >>> from multidev.devices import registry
    >>> registry.resolve("/cpu:0").name
    '/job:localhost/replica:0/task:0/device:CPU:0'
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass

import torch

from multidev._core.errors import UnknownDeviceError
from multidev.devices import configuration, context, options, physical
from multidev.devices.physical import LogicalDevice
from multidev.devices.spec import DeviceSpec

LOCAL_JOB = "localhost"
_log = logging.getLogger("multidev.devices")


@dataclass(frozen=True)
class Device:
    """One logical device.

    Attributes:
        name: canonical name, ``/job:localhost/replica:0/task:0/device:CPU:0``.
        device_type: ``"CPU"`` or ``"GPU"``.
        index: index among the logical devices of its type.
        torch_device: where its tensors live (all logical CPUs share ``torch.device('cpu')``).
        physical_index: index of the physical device it was carved from.
        memory_limit: limit in bytes (GPU logical devices with a configured limit), else None.
    """

    name: str
    device_type: str
    index: int
    torch_device: torch.device
    physical_index: int
    memory_limit: int | None = None

    @property
    def spec(self) -> DeviceSpec:
        """The name as a :class:`DeviceSpec` (parsed once per name)."""
        return _spec_of(self.name)

    def __str__(self) -> str:
        return self.name


@functools.lru_cache(maxsize=None)
def _spec_of(name: str) -> DeviceSpec:
    return DeviceSpec.from_string(name)


class _Registry:
    """The frozen table of logical devices, and lazily created per-device streams."""

    def __init__(self, devices: list[Device]) -> None:
        self.devices = devices
        self.device_set = frozenset(devices)
        self.by_key = {(d.device_type, d.index): d for d in devices}
        self.streams: dict[str, torch.cuda.Stream] = {}


_registry: _Registry | None = None
_local_tasks: set[tuple[str, int]] = {(LOCAL_JOB, 0)}
_warned: set[str] = set()
_stream_lock = threading.Lock()


def canonical_name(device_type: str, index: int) -> str:
    return f"/job:{LOCAL_JOB}/replica:0/task:0/device:{device_type}:{index}"


def _check_growth(visible: list[physical.PhysicalDevice]) -> None:
    growths = {
        configuration.STATE.growth.get(d)
        for d in visible
        if d.device_type == "GPU" and d not in configuration.STATE.virtual
    }
    if len(growths) > 1 and not configuration.forced_growth():
        raise ValueError(
            "Memory growth cannot differ between GPU devices; call "
            "md.config.experimental.set_memory_growth(gpu, True) for every visible GPU (or for none)."
        )


LOGICAL_CPUS_ENV = "MULTIDEV_LOGICAL_CPUS"
DEVICES_PER_WORKER_ENV = "MULTIDEV_DEVICES_PER_WORKER"  # set by `multidev launch --devices-per-worker K`


def _env_logical_cpus(has_gpus: bool) -> list[physical.LogicalDeviceConfiguration] | None:
    """An unconfigured CPU split by the environment: ``MULTIDEV_LOGICAL_CPUS=K``, or on a machine
    without GPUs ``MULTIDEV_DEVICES_PER_WORKER=K`` (the launcher's devices per worker)."""
    name = LOGICAL_CPUS_ENV
    text = os.environ.get(name, "").strip()
    if not text and not has_gpus:
        name = DEVICES_PER_WORKER_ENV
        text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name} must be a positive integer, got {text!r}.")
    return [physical.LogicalDeviceConfiguration()] * int(text)


def _build(visible: list[physical.PhysicalDevice]) -> list[Device]:
    devices: list[Device] = []
    counts = {"CPU": 0, "GPU": 0}
    has_gpus = any(d.device_type == "GPU" for d in visible)
    for dev in visible:
        configs = configuration.STATE.virtual.get(dev) or (
            dev.device_type == "CPU" and _env_logical_cpus(has_gpus)) or [physical.LogicalDeviceConfiguration()]
        index = physical.physical_index(dev)
        for config in configs:
            n = counts[dev.device_type]
            counts[dev.device_type] += 1
            limit = None if config.memory_limit is None else config.memory_limit * 1024 * 1024
            devices.append(
                Device(
                    name=canonical_name(dev.device_type, n),
                    device_type=dev.device_type,
                    index=n,
                    torch_device=physical.torch_device_for(dev.device_type, index),
                    physical_index=index,
                    memory_limit=limit,
                )
            )
    return devices


def _cap_gpu_memory(devices: list[Device]) -> None:
    """Cap each physical GPU split into limited logical GPUs at the sum of their limits.

    torch's caching allocator then raises its out-of-memory error beyond the total; the
    per-logical-device limits themselves are enforced by :mod:`multidev.devices.memory`.
    """
    totals: dict[int, int] = {}
    for d in devices:
        if d.device_type == "GPU" and d.memory_limit is not None:
            totals[d.physical_index] = totals.get(d.physical_index, 0) + d.memory_limit
    for index, limit in totals.items():
        capacity = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / capacity), index)


def _table() -> _Registry:
    """The registry, built from the configuration on first use (which freezes the configuration)."""
    global _registry
    registry = _registry
    if registry is not None:
        return registry
    with configuration.LOCK:
        if _registry is None:
            visible = configuration.get_visible_devices()
            _check_growth(visible)
            devices = _build(visible)
            if torch.cuda.is_available() and any(d.device_type == "GPU" and d.memory_limit for d in devices):
                _cap_gpu_memory(devices)
            configuration.STATE.initialized = True
            _registry = _Registry(devices)
        return _registry


def initialize() -> None:
    """Build the logical devices from the configuration and freeze it (idempotent).

    Raises:
        ValueError: the configuration is inconsistent (memory growth differing between GPUs);
            nothing is frozen then, so the configuration can still be fixed.
    """
    _table()


def logical_devices(device_type: str | None = None) -> list[Device]:
    """The logical devices, optionally of one type (initializes the registry)."""
    wanted = physical.check_device_type(device_type)
    return [d for d in _table().devices if wanted is None or d.device_type == wanted]


def list_logical_devices(device_type: str | None = None) -> list[LogicalDevice]:
    """The logical devices as ``LogicalDevice`` records (initializes the devices).

    As in TensorFlow, local names leave out the job, replica and task: ``/device:CPU:0``
    (``Device.name`` and strategies' ``worker_devices`` keep the full canonical name).

    Example:
        >>> md.config.list_logical_devices("CPU")
        [LogicalDevice(name='/device:CPU:0', device_type='CPU')]
    """
    return [LogicalDevice(f"/device:{d.device_type}:{d.index}", d.device_type) for d in logical_devices(device_type)]


def set_local_task(job: str, task: int) -> None:
    """Let names of ``/job:<job>/task:<task>`` (this worker in a cluster) resolve to local devices."""
    if not isinstance(job, str) or not job or isinstance(task, bool) or not isinstance(task, int) or task < 0:
        raise ValueError(f"set_local_task expects a job name and a task index >= 0, got {job!r}, {task!r}.")
    _local_tasks.add((job, task))


def _is_local(spec: DeviceSpec) -> bool:
    job = LOCAL_JOB if spec.job is None else spec.job
    task = 0 if spec.task is None else spec.task
    return spec.replica in (None, 0) and ((job, task) in _local_tasks or (job == LOCAL_JOB and task == 0))


def _full_name(spec: DeviceSpec) -> str:
    filled = spec.replace(
        job=spec.job or LOCAL_JOB,
        replica=0 if spec.replica is None else spec.replica,
        task=0 if spec.task is None else spec.task,
    )
    return filled.to_string()


def _unknown(spec: DeviceSpec, table: _Registry) -> Device:
    """Soft placement picks an existing device; without it, raise ``UnknownDeviceError``: TensorFlow
    2.21's InvalidArgumentError and, for the GPU guide's ``except RuntimeError``, a RuntimeError."""
    full = _full_name(spec)
    if not options.get_soft_device_placement():
        raise UnknownDeviceError(
            f"{full} unknown device. Known devices: {[d.name for d in table.devices]}. Use one of "
            "them, or md.config.set_soft_device_placement(True) to run on an existing device."
        )
    chosen = table.by_key.get((spec.device_type, 0)) or table.by_key[("CPU", 0)]
    if full not in _warned:
        _warned.add(full)
        _log.warning("Device %s does not exist; soft device placement runs its ops on %s.", full, chosen.name)
    return chosen


def _lookup(spec: DeviceSpec, table: _Registry) -> Device:
    device_type = spec.device_type or "CPU"
    index = 0 if spec.device_index is None else spec.device_index
    device = table.by_key.get((device_type, index))
    if device is None or not _is_local(spec):
        return _unknown(spec.replace(device_type=device_type, device_index=index), table)
    return device


def _from_torch(device: torch.device, table: _Registry) -> Device:
    device_type = "GPU" if device.type == "cuda" else "CPU" if device.type == "cpu" else None
    index = device.index or 0
    for d in table.devices:
        if d.device_type == device_type and (device_type == "CPU" or d.physical_index == index):
            return d
    for d in table.devices:       # a torch device that stands for a GPU (tests/devices/fake_gpus.py: 'meta')
        if d.torch_device == device:
            return d
    return _unknown(DeviceSpec(device_type=(device_type or device.type.upper()), device_index=index), table)


def resolve(name: "str | DeviceSpec | Device | LogicalDevice | torch.device | None") -> Device:
    """Turn a device name into a logical :class:`Device` (initializes the registry).

    Partial names merge with this thread's innermost scope (``"GPU:1"``, ``"/cpu:0"``); unset
    fields default to ``/job:localhost/replica:0/task:0`` and index 0; no type at all means the
    scope's device, or ``CPU:0`` outside any scope.

    Raises:
        TypeError: ``name`` is of another type.
        ValueError: ``name`` is not a valid device name.
        md.errors.UnknownDeviceError: ``"<name> unknown device."`` (an InvalidArgumentError and a
            RuntimeError) when the device does not exist and soft placement is off (with it on, an existing device of the same type, else CPU:0).
    """
    table = _table()
    scope = context.innermost()
    if name is None:
        return scope.device if scope is not None else table.by_key[("CPU", 0)]
    if isinstance(name, Device):
        return name if name in table.device_set else _lookup(name.spec, table)
    if isinstance(name, torch.device):
        return _from_torch(name, table)
    if isinstance(name, LogicalDevice):
        name = name.name
    if isinstance(name, str):
        name = DeviceSpec.from_string(name)
    if not isinstance(name, DeviceSpec):
        raise TypeError(
            f"A device must be a name such as '/GPU:0', a DeviceSpec, a LogicalDevice or a torch.device, got {name!r}."
        )
    return _lookup(merge_with_scope(name), table)


def resolve_merged(spec: DeviceSpec) -> Device:
    """:func:`resolve` for a spec already merged with the scope (used by ``md.device``)."""
    return _lookup(spec, _table())


def merge_with_scope(spec: DeviceSpec) -> DeviceSpec:
    """Merge ``spec`` into this thread's innermost scope's spec, field by field."""
    scope = context.innermost()
    return spec if scope is None else scope.spec.make_merged_spec(spec)


def lookup(name: "str | DeviceSpec") -> Device:
    """Strict :func:`resolve` for APIs without soft placement (memory info): unknown -> ValueError."""
    table = _table()
    spec = DeviceSpec.from_string(name) if isinstance(name, str) else name
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"device must be a device name such as 'GPU:0', got {name!r}.")
    key = (spec.device_type or "CPU", spec.device_index or 0)
    device = table.by_key.get(key)
    if device is None or not _is_local(spec):
        raise ValueError(
            f"No device found with the device name {name!r}; known devices: {[d.name for d in table.devices]}."
        )
    return device


def device_for_tensor(tensor: torch.Tensor) -> Device:
    """The logical device a tensor lives on: the scope's if it shares its torch device, else the first match."""
    scope = context.innermost()
    if scope is not None and scope.device.torch_device == tensor.device:
        return scope.device
    return _from_torch(tensor.device, _table())


def stream_for(device: Device) -> "torch.cuda.Stream | None":
    """The logical device's own CUDA stream (created on first use); None for CPU devices (and for a
    GPU whose torch device is not CUDA: the stand-in GPUs of tests/devices/fake_gpus.py)."""
    if not isinstance(device, Device):
        raise TypeError(f"stream_for expects a registry.Device, got {device!r}.")
    if device.device_type != "GPU" or device.torch_device.type != "cuda":
        return None
    table = _table()
    with _stream_lock:
        stream = table.streams.get(device.name)
        if stream is None:
            stream = table.streams[device.name] = torch.cuda.Stream(device=device.torch_device)
    return stream


__all__ = [
    "Device",
    "initialize",
    "logical_devices",
    "list_logical_devices",
    "resolve",
    "lookup",
    "merge_with_scope",
    "resolve_merged",
    "device_for_tensor",
    "stream_for",
    "set_local_task",
    "canonical_name",
]
