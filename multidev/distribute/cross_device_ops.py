"""Cross-device reductions (``tf.distribute.CrossDeviceOps``) and the choice among them.

``choose_cross_device_ops`` is the one place that decides a collective's algorithm for a set of
devices: NCCL only when every replica is a distinct physical GPU, otherwise reduction to one
device (with TensorFlow's warning when virtual GPUs share a physical one).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import torch

from multidev._core.enums import ReduceOp
from multidev.collectives import algorithms
from multidev.devices import registry
from multidev.values.distributed import DistributedValues, Mirrored

_log = logging.getLogger("multidev.distribute")


def _torch_devices(destinations: Any) -> list[torch.device]:
    """Devices named by ``destinations``: a device name, a list of names, or a distributed value."""
    if isinstance(destinations, DistributedValues):
        return [v.device for v in destinations.values]
    if isinstance(destinations, torch.Tensor):
        values = getattr(destinations, "values", None)
        if isinstance(values, tuple):  # a distributed variable
            return [v.device for v in values]
        return [destinations.device]
    if isinstance(destinations, (str, registry.Device)):
        return [registry.resolve(destinations).torch_device]
    if isinstance(destinations, (list, tuple)) and destinations:
        return [registry.resolve(d).torch_device for d in destinations]
    raise ValueError(
        f"destinations must be a device name, a list of device names, a variable or a distributed "
        f"value; got {destinations!r}."
    )


def _components(value: Any) -> list[torch.Tensor]:
    if isinstance(value, DistributedValues):
        return list(value.values)
    if isinstance(value, torch.Tensor):
        return [value]
    raise TypeError(f"Expected a tensor or a PerReplica/Mirrored value to reduce, got {value!r}.")


class CrossDeviceOps:
    """Base of cross-device reductions; subclasses choose ``_all_reduce``'s algorithm."""

    def reduce(self, reduce_op: ReduceOp | str, per_replica_value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduce ``per_replica_value`` onto ``destinations`` (a tensor for one device, else ``Mirrored``)."""
        op = ReduceOp.from_value(reduce_op)
        devices = _torch_devices(destinations)
        total = algorithms.reduce_to_one(_components(per_replica_value), op, devices[0])
        copies = algorithms.broadcast(total, devices)
        return copies[0] if len(copies) == 1 else Mirrored(copies)

    def batch_reduce(self, reduce_op: ReduceOp | str, value_destination_pairs: Sequence[tuple[Any, Any]],
                     options: Any = None) -> list:
        """``reduce`` for each ``(value, destinations)`` pair."""
        return [self.reduce(reduce_op, v, d, options) for v, d in value_destination_pairs]

    def broadcast(self, tensor: torch.Tensor, destinations: Any) -> Any:
        """Copy ``tensor`` to every destination device."""
        copies = algorithms.broadcast(tensor, _torch_devices(destinations), private=True)
        return copies[0] if len(copies) == 1 else Mirrored(copies)

    def _all_reduce(self, op: ReduceOp, inputs: Sequence[torch.Tensor], devices: Sequence[torch.device],
                    private: bool) -> list[torch.Tensor]:
        return algorithms.all_reduce(inputs, op, devices, devices[0], private=private)


class ReductionToOneDevice(CrossDeviceOps):
    """Sum every replica's value on one device, then copy the result back."""

    def __init__(self, reduce_to_device: str | None = None, accumulation_fn: Any = None):
        self._reduce_to_device = reduce_to_device
        if accumulation_fn is not None and not callable(accumulation_fn):
            raise TypeError(f"accumulation_fn must be callable, got {accumulation_fn!r}.")
        self._accumulation_fn = accumulation_fn

    def _target(self, devices: Sequence[torch.device]) -> torch.device:
        if self._reduce_to_device is None:
            return devices[0]
        return registry.resolve(self._reduce_to_device).torch_device

    def reduce(self, reduce_op, per_replica_value, destinations, options=None):
        if self._accumulation_fn is None:
            return super().reduce(reduce_op, per_replica_value, destinations, options)
        op = ReduceOp.from_value(reduce_op)
        devices = _torch_devices(destinations)
        parts = [t.to(self._target(devices)) for t in _components(per_replica_value)]
        total = self._accumulation_fn(parts)
        if op is ReduceOp.MEAN:
            total = total / len(parts)
        copies = algorithms.broadcast(total, devices)
        return copies[0] if len(copies) == 1 else Mirrored(copies)

    def _all_reduce(self, op, inputs, devices, private):
        return algorithms.all_reduce(inputs, op, devices, self._target(devices), private=private)


class NcclAllReduce(CrossDeviceOps):
    """All-reduce with NCCL; needs one distinct physical GPU per replica."""

    def __init__(self, num_packs: int = 1):
        if not isinstance(num_packs, int) or num_packs < 0:
            raise ValueError(f"num_packs must be a non-negative integer, got {num_packs!r}.")
        self.num_packs = num_packs

    def _all_reduce(self, op, inputs, devices, private):
        if len(set(devices)) != len(devices) or any(d.type != "cuda" for d in devices):
            raise ValueError(
                f"NcclAllReduce needs one distinct GPU per replica, got devices {list(map(str, devices))}. "
                "Use ReductionToOneDevice for CPUs or virtual GPUs."
            )
        return algorithms.nccl_all_reduce(inputs, op)


class HierarchicalCopyAllReduce(CrossDeviceOps):
    """Tree reduction over the devices, then broadcast (for GPUs without NCCL)."""

    def __init__(self, num_packs: int = 1):
        if not isinstance(num_packs, int) or num_packs < 0:
            raise ValueError(f"num_packs must be a non-negative integer, got {num_packs!r}.")
        self.num_packs = num_packs

    def _all_reduce(self, op, inputs, devices, private):
        return algorithms.hierarchical_copy_all_reduce(inputs, op, devices)


def choose_cross_device_ops(devices: Sequence[registry.Device]) -> CrossDeviceOps:
    """TensorFlow's automatic choice for ``MirroredStrategy(cross_device_ops=None)``."""
    if len(devices) < 2 or any(d.device_type != "GPU" for d in devices):
        return ReductionToOneDevice()
    if len({d.physical_index for d in devices}) != len(devices):
        _log.warning("NCCL is not supported when using virtual GPUs, falling back to reduction to one device")
        return ReductionToOneDevice()
    if not torch.cuda.is_available() or not hasattr(torch.cuda, "nccl") or not torch.cuda.nccl.is_available(
        [torch.empty(0, device=d.torch_device) for d in devices]
    ):
        _log.warning("NCCL is not available, falling back to reduction to one device")
        return ReductionToOneDevice()
    return NcclAllReduce()


__all__ = ["CrossDeviceOps", "ReductionToOneDevice", "NcclAllReduce", "HierarchicalCopyAllReduce"]
