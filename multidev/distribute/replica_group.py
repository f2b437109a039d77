"""TEMPORARY stand-in for the lead's ``ReplicaGroup`` (same API); replaced by main's at merge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch


@dataclass(frozen=True)
class ReplicaGroup:
    """The replicas of one process: devices, their rendezvous and how they reduce."""

    devices: tuple[torch.device, ...]
    rendezvous: Any
    cooperative_reduce: bool
    shared_storage: bool
    bucket_bytes: int
    overlap: Callable

    @property
    def size(self) -> int:
        return len(self.devices)

    def exchange(self, replica_id: int, key: Any, payload: Any, combine: Callable) -> Any:
        return self.rendezvous.exchange(replica_id, key, payload, combine)

    def share(self, replica_id: int, key: Any, payload: Any) -> list:
        return self.rendezvous.exchange(replica_id, ("share", key), payload, lambda p: [p] * len(p))

    def barrier(self, replica_id: int, name: str) -> None:
        if self.size > 1:
            self.rendezvous.exchange(replica_id, ("barrier", name), None, lambda p: [None] * len(p))
