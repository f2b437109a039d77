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
import threading
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

    # The meetings are the rendezvous's own methods (bound in __post_init__, so a call goes straight there):
    #: ``exchange(replica_id, key, payload, combine)``: meet the other local replicas at ``key``; the last
    #: to arrive runs ``combine`` over every replica's ``payload`` (replica order), each gets its item.
    exchange: Callable[[int, tuple, Any, Callable[[list], list]], Any] = dataclasses.field(init=False)
    #: ``share(replica_id, key, payload)``: every local replica's ``payload`` in replica order, on every replica.
    share: Callable[[int, tuple, Any], list] = dataclasses.field(init=False)
    #: ``barrier(replica_id, name)``: wait until every local replica reached this point.
    barrier: Callable[[int, str], None] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        for name in ("exchange", "share", "barrier"):
            object.__setattr__(self, name, getattr(self.rendezvous, name))

    @property
    def size(self) -> int:
        """How many local replicas."""
        return len(self.devices)


class RunningSteps:
    """The current ``strategy.run``'s per-replica step notes (``values.context.ReplicaStep``, fresh
    every run), written by the strategy that runs the replicas and read by what reduces their
    gradients (``backward_reduce``): one object both hold, instead of one reading the other's state."""

    __slots__ = ("steps", "active", "owner")

    def __init__(self) -> None:
        self.steps: list = []
        self.active = False
        self.owner: int | None = None

    def begin(self, steps: list) -> None:
        """A run starts with these notes, one per local replica, on the calling thread."""
        self.steps = steps
        self.owner = threading.get_ident()
        self.active = True

    def end(self) -> None:
        self.active = False

    def running_elsewhere(self) -> bool:
        """Whether another thread's run is in progress. A run marked active by this very thread is
        over: a Ctrl-C landing in its ``finally`` before ``end`` ran left the mark behind."""
        return self.active and self.owner != threading.get_ident()
