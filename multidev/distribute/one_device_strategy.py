"""``OneDeviceStrategy``: everything on one device, through the strategy API."""

from __future__ import annotations

from typing import final

from multidev.devices import registry
from multidev.distribute.distribute_lib import ReplicatedExtended
from multidev.distribute.strategy import Strategy
from multidev.distribute.variable_layout import PlainLayout


@final
class _OneDeviceExtended(ReplicatedExtended):
    """``OneDeviceStrategy.extended``: variables stay plain tensors, placed on the strategy's device."""

    def __init__(self, strategy: "OneDeviceStrategy", device: registry.Device):
        super().__init__(strategy, [device], None, layout=PlainLayout(device))


class OneDeviceStrategy(Strategy):
    """Places variables and computation on ``device``; a single replica.

    Example:
        >>> strategy = md.distribute.OneDeviceStrategy("/cpu:0")
        >>> strategy.run(lambda x: x * 2, args=(torch.ones(2),))
        tensor([2., 2.])
    """

    def __init__(self, device: str):
        if not isinstance(device, (str, registry.Device)):
            raise TypeError(f"OneDeviceStrategy needs one device name such as '/gpu:0', got {device!r}.")
        super().__init__(_OneDeviceExtended(self, registry.resolve(device)))
