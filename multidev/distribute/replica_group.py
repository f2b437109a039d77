"""The replicas of one process that meet in collectives: one small frozen object.

Replica contexts, gradient reducers and buckets need the same few facts about their strategy's
local replicas: their torch devices, the rendezvous where they meet, whether they share one CPU
(then they reduce cooperatively and may split an update), whether they share one storage
(CentralStorageStrategy on one memory), the bucket size of the all-reduce, and how gradients may be
reduced while backward still runs. ``ReplicatedExtended`` builds one ``ReplicaGroup`` when the
strategy is made and hands it to whoever needs it (``strategy.extended.replica_group``), so no
code outside ``distribute_lib.py`` reads the extended's private state.

``replica_id`` below is always the LOCAL index of a replica in this process (a distributed
variable's component index, ``current_replica_id()``), never the global one.

Example:
    group = strategy.extended.replica_group
    everyone = group.share(replica_id, ("optimizer.step",), my_grads)   # every replica's, in order
    group.barrier(replica_id, "optimizer.step")
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import torch

from multidev.collectives.rendezvous import Rendezvous


def _no_overlap(refs: Sequence[torch.Tensor]) -> None:
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class ReplicaGroup:
    """The local replicas of one strategy (see the module docstring)."""

    devices: tuple[torch.device, ...]
    rendezvous: Rendezvous
    #: Replicas of one process on one CPU: they reduce in place together and may split an update.
    cooperative_reduce: bool
    #: Replicas share one storage of each variable (CentralStorageStrategy on one memory).
    shared_storage: bool
    #: Gradient bucket size for the all-reduce (CommunicationOptions.bytes_per_pack sets it).
    bucket_bytes: int
    #: ``overlap(leaves)``: an object reducing these gradients while backward runs, or None.
    overlap: Callable[[Sequence[torch.Tensor]], Any] = _no_overlap

    @property
    def size(self) -> int:
        """How many local replicas."""
        return len(self.devices)

    def exchange(self, replica_id: int, key: tuple, payload: Any, combine: Callable[[list], list]) -> Any:
        """Meet the other local replicas at ``key``: the last to arrive runs ``combine`` over every
        replica's ``payload`` (replica order), and each replica gets its own item of the result."""
        return self.rendezvous.exchange(replica_id, key, payload, combine)

    def share(self, replica_id: int, key: tuple, payload: Any) -> list:
        """Every local replica's ``payload`` in replica order, returned on every replica."""
        return self.rendezvous.share(replica_id, key, payload)

    def barrier(self, replica_id: int, name: str) -> None:
        """Wait until every local replica reached this point (nothing to wait for with one replica)."""
        if len(self.devices) > 1:
            self.rendezvous.barrier(replica_id, name)


class RunningSteps:
    """The current ``strategy.run``'s per-replica step notes (``values.context.ReplicaStep``, fresh
    every run), written by the strategy that runs the replicas and read by what reduces their
    gradients (``backward_reduce``): one object both hold, instead of one reading the other's state."""

    __slots__ = ("steps", "active")

    def __init__(self) -> None:
        self.steps: list = []
        self.active = False

    def begin(self, steps: list) -> None:
        """A run starts with these notes, one per local replica."""
        self.steps = steps
        self.active = True

    def end(self) -> None:
        self.active = False
