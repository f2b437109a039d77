"""``MirroredStrategy``: synchronous training with one copy of every variable per replica device."""

from __future__ import annotations

import logging
from typing import Sequence, final

from multidev.distribute._devices import default_devices, resolve_devices
from multidev.distribute.cross_device_ops import CrossDeviceOps, choose_cross_device_ops
from multidev.devices import registry
from multidev.distribute.distribute_lib import ReplicatedExtended
from multidev.distribute.strategy import Strategy

_log = logging.getLogger("multidev.distribute")


@final
class MirroredExtended(ReplicatedExtended):
    """``MirroredStrategy.extended``: one copy of every variable per replica device, one process."""

    def __init__(self, strategy: "MirroredStrategy", devices: Sequence[registry.Device], cross_device_ops: CrossDeviceOps):
        super().__init__(strategy, devices, cross_device_ops)


class MirroredStrategy(Strategy):
    """Replicates variables on every device and keeps the copies identical.

    Args:
        devices: device names; default every logical GPU, else every logical CPU (TensorFlow's
            ``all_local_devices``: one CPU unless it was split into logical devices).
        cross_device_ops: how gradients are summed; default chosen as TensorFlow does.

    Example:
        >>> strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        >>> with strategy.scope():
        ...     model = torch.nn.Linear(4, 1)
        >>> strategy.num_replicas_in_sync
        2
    """

    def __init__(self, devices: Sequence[str] | None = None, cross_device_ops: CrossDeviceOps | None = None):
        resolved = default_devices() if devices is None else resolve_devices(devices, "devices")
        if cross_device_ops is not None and not isinstance(cross_device_ops, CrossDeviceOps):
            raise TypeError(
                f"cross_device_ops must be a md.distribute.CrossDeviceOps (ReductionToOneDevice, "
                f"NcclAllReduce, HierarchicalCopyAllReduce), got {cross_device_ops!r}."
            )
        ops = cross_device_ops or choose_cross_device_ops(resolved)
        super().__init__(MirroredExtended(self, resolved, ops))
        _log.info("Using MirroredStrategy with devices %s", tuple(d.name for d in resolved))
