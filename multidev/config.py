"""``md.config``: TensorFlow's ``tf.config`` device configuration, with its semantics and errors.

Configure before the devices are initialized (first ``list_logical_devices``, first op in an
``md.device`` scope, first strategy); afterwards changes raise ``RuntimeError`` ("... cannot be
modified after being initialized") and setting the same value again is a no-op.

Example:
    >>> cpu = md.config.list_physical_devices("CPU")[0]
    >>> md.config.set_logical_device_configuration(
    ...     cpu, [md.config.LogicalDeviceConfiguration(), md.config.LogicalDeviceConfiguration()])
    >>> [d.name for d in md.config.list_logical_devices("CPU")]
    ['/job:localhost/replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1']
"""

from __future__ import annotations

import sys
import types

from multidev.devices import determinism, memory, physical, threading_config
from multidev.devices.configuration import (
    get_logical_device_configuration,
    get_memory_growth,
    get_visible_devices,
    list_physical_devices,
    set_logical_device_configuration,
    set_memory_growth,
    set_visible_devices,
)
from multidev.devices.options import (
    get_device_policy,
    get_soft_device_placement,
    set_device_policy,
    set_soft_device_placement,
)
from multidev.devices.physical import LogicalDevice, LogicalDeviceConfiguration, PhysicalDevice
from multidev.devices.registry import list_logical_devices
from multidev.function import functions_run_eagerly, run_functions_eagerly


def get_device_details(device: PhysicalDevice) -> dict:
    """Details of a physical device: ``device_name`` and ``compute_capability`` for GPUs, ``{}`` for the CPU.

    Raises:
        ValueError: ``device`` is not one of ``md.config.list_physical_devices()``.
    """
    return physical.device_details(physical.check_physical(device))


threading = types.ModuleType(
    "multidev.config.threading",
    "``md.config.threading``: intra-op and inter-op thread counts (torch's thread pools), settable "
    "before the devices are initialized.",
)
for _name in ("set_intra_op_parallelism_threads", "get_intra_op_parallelism_threads",
              "set_inter_op_parallelism_threads", "get_inter_op_parallelism_threads"):
    setattr(threading, _name, getattr(threading_config, _name))
threading.__all__ = sorted(n for n in vars(threading) if not n.startswith("_"))
sys.modules[threading.__name__] = threading

experimental = types.ModuleType(
    "multidev.config.experimental",
    "``md.config.experimental``: memory growth and statistics, device details, device policy, "
    "and TensorFlow's older ``*virtual_device*`` names for logical device configuration.",
)
for _name, _value in {
    "set_memory_growth": set_memory_growth,
    "get_memory_growth": get_memory_growth,
    "get_memory_info": memory.get_memory_info,
    "get_memory_usage": memory.get_memory_usage,
    "reset_memory_stats": memory.reset_memory_stats,
    "get_device_details": get_device_details,
    "set_device_policy": set_device_policy,
    "get_device_policy": get_device_policy,
    "set_virtual_device_configuration": set_logical_device_configuration,
    "get_virtual_device_configuration": get_logical_device_configuration,
    "VirtualDeviceConfiguration": LogicalDeviceConfiguration,
    "list_physical_devices": list_physical_devices,
    "list_logical_devices": list_logical_devices,
    "get_visible_devices": get_visible_devices,
    "set_visible_devices": set_visible_devices,
    "enable_op_determinism": determinism.enable_op_determinism,
}.items():
    setattr(experimental, _name, _value)
experimental.__all__ = sorted(n for n in vars(experimental) if not n.startswith("_"))
sys.modules[experimental.__name__] = experimental
del _name, _value

__all__ = [
    "list_physical_devices",
    "list_logical_devices",
    "get_visible_devices",
    "set_visible_devices",
    "get_logical_device_configuration",
    "set_logical_device_configuration",
    "get_soft_device_placement",
    "set_soft_device_placement",
    "LogicalDeviceConfiguration",
    "LogicalDevice",
    "PhysicalDevice",
    "experimental",
    "threading",
    "run_functions_eagerly",
    "functions_run_eagerly",
]
