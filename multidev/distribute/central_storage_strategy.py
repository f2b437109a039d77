"""``experimental.CentralStorageStrategy``: variables on one parameter device, computation mirrored.

Each variable is an ``AggregatingVariable``: one copy, on the parameter device, presented as one
value (``experimental_local_results(v) == (v,)``); writes from a replica need an aggregation
(NONE raises ValueError, as TensorFlow). When every compute device shares the parameter device's
memory (one GPU, or logical CPUs), every replica reads that one storage, gradients are summed onto
it and replica 0 alone applies the update. With compute devices elsewhere (parameters on the CPU,
computation on GPUs), each compute device keeps a working copy, refreshed from the first at the
next ``run`` after a write (multidev's difference: TensorFlow copies the central value each step).
"""

from __future__ import annotations

from typing import Sequence, final

from multidev.devices import registry
from multidev.distribute._devices import resolve_devices
from multidev.distribute.cross_device_ops import ReductionToOneDevice
from multidev.distribute.distribute_lib import ReplicatedExtended
from multidev.distribute.strategy import Strategy
from multidev.distribute.variable_layout import CentralLayout


@final
class _CentralStorageExtended(ReplicatedExtended):
    """``CentralStorageStrategy.extended``: variables stored once, on ``parameter_device``."""

    def __init__(self, strategy: "CentralStorageStrategy", compute: Sequence[registry.Device],
                 parameter: registry.Device):
        super().__init__(strategy, compute, ReductionToOneDevice(parameter.name), layout=CentralLayout(parameter, compute))


def _default_compute_devices() -> list[registry.Device]:
    """TensorFlow's default: every logical GPU, else the first CPU (not every logical CPU)."""
    gpus = registry.logical_devices("GPU")
    return gpus if gpus else [registry.resolve("/device:CPU:0")]


class CentralStorageStrategy(Strategy):
    """Synchronous training with variables stored once, on ``parameter_device``.

    Args:
        compute_devices: replica devices; default every logical GPU, else CPU:0 (as TensorFlow).
        parameter_device: where variables live; default the CPU with several GPUs, else the one device.
    """

    def __init__(self, compute_devices: Sequence[str] | None = None, parameter_device: str | None = None):
        compute = (_default_compute_devices() if compute_devices is None
                   else resolve_devices(compute_devices, "compute_devices"))
        if parameter_device is None:
            parameter = registry.resolve("/device:CPU:0") if len({d.torch_device for d in compute}) > 1 else compute[0]
        else:
            parameter = registry.resolve(parameter_device)
        super().__init__(_CentralStorageExtended(self, compute, parameter))
