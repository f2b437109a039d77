"""Where a strategy keeps its variables: a small policy object injected into ``strategy.extended``.

* ``MirroredLayout``: one copy per replica device (MirroredStrategy, MultiWorkerMirroredStrategy);
* ``CentralLayout``: one copy on the parameter device, presented as one value (CentralStorageStrategy);
* ``PlainLayout``: no distributed variables; variables, parameters and buffers optionally moved to one device
  (OneDeviceStrategy, the default strategy).
"""

from __future__ import annotations

import abc
from typing import Any, Sequence, final

import torch

from multidev._core.enums import VariableSynchronization
from multidev._core.moved_in_place import move_in_place
from multidev.devices import registry
from multidev.values.central import AggregatingVariable
from multidev.values.variables import MirroredVariable, SyncOnReadVariable


class VariableLayout(abc.ABC):
    """How variables created in a strategy's scope are laid out over its replica devices."""

    #: Whether ``md.Variable(...)`` and module parameters in scope become distributed variables.
    distributes: bool = True
    #: Whether every replica's component aliases one storage.
    share_storage: bool = False

    def variable_class(self, synchronization: VariableSynchronization) -> type:
        """The distributed-variable class for ``synchronization``."""
        return SyncOnReadVariable if synchronization is VariableSynchronization.ON_READ else MirroredVariable

    def component_devices(self, devices: Sequence[registry.Device]) -> list[torch.device]:
        """One torch device per replica: where that replica's component lives."""
        return [d.torch_device for d in devices]

    def parameter_devices(self, worker_devices: tuple[str, ...]) -> tuple[str, ...]:
        """TensorFlow's ``extended.parameter_devices``: where the variables live."""
        return worker_devices

    def place_value(self, value: torch.Tensor) -> bool:
        """For non-distributing layouts: move ``value`` (a new parameter, buffer or variable's tensor) to the
        strategy's device, in place; whether it moved."""
        return False


@final
class MirroredLayout(VariableLayout):
    """One copy of every variable per replica device, kept equal (ON_WRITE) or reduced on read (ON_READ)."""


@final
class CentralLayout(VariableLayout):
    """One copy on ``parameter_device`` (``AggregatingVariable``); replicas alias it when every compute
    device shares its memory, else each compute device keeps a working copy."""

    def __init__(self, parameter_device: registry.Device, compute_devices: Sequence[registry.Device]):
        self.parameter_device = parameter_device
        self.share_storage = all(d.torch_device == parameter_device.torch_device for d in compute_devices)

    def variable_class(self, synchronization: VariableSynchronization) -> type:
        if synchronization is VariableSynchronization.ON_READ:
            return SyncOnReadVariable
        return AggregatingVariable

    def component_devices(self, devices: Sequence[registry.Device]) -> list[torch.device]:
        if self.share_storage:
            return [self.parameter_device.torch_device] * len(devices)
        return super().component_devices(devices)

    def parameter_devices(self, worker_devices: tuple[str, ...]) -> tuple[str, ...]:
        return (self.parameter_device.name,) if self.share_storage else worker_devices


@final
class PlainLayout(VariableLayout):
    """Plain ``md.Variable``s; variables, module parameters and buffers made in scope move to ``device``
    (None: stay put)."""

    distributes = False

    def __init__(self, device: registry.Device | None = None):
        self._device = device

    def place_value(self, value: torch.Tensor) -> bool:
        if self._device is None or value.device == self._device.torch_device:
            return False
        move_in_place(value, self._device.torch_device)   # a Keras weight keeps its class, name and flags
        return True


__all__ = ["VariableLayout", "MirroredLayout", "CentralLayout", "PlainLayout"]
