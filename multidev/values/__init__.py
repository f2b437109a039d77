"""Distributed values: PerReplica, Mirrored, MirroredVariable, SyncOnReadVariable, md.Variable.

This layer knows nothing about collectives: when a variable write needs a cross-replica reduction
it asks the current replica context (implemented by ``multidev.distribute``) through the small
interface in ``context.py``.
"""

from multidev.values.context import current_replica_id
from multidev.values.distributed import AnyDistributedValue, DistributedValues, Mirrored, PerReplica
from multidev.values.variables import DistributedVariable, MirroredVariable, SyncOnReadVariable, Variable

__all__ = [
    "current_replica_id",
    "DistributedValues",
    "AnyDistributedValue",
    "PerReplica",
    "Mirrored",
    "Variable",
    "DistributedVariable",
    "MirroredVariable",
    "SyncOnReadVariable",
]
