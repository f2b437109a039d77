"""``AggregatingVariable``: a ``CentralStorageStrategy`` variable, one copy on the parameter device.

TensorFlow keeps each central-storage variable once, on the parameter device, and wraps it so that
writes from a replica are aggregated first. Here the copy every replica reads is that storage
(the replicas' components alias it when the compute devices share the parameter device's memory),
so the variable presents itself as one value: ``strategy.experimental_local_results(v)`` is
``(v,)``, ``v.device`` is the parameter device, its repr shows one tensor. A write from a replica
needs an aggregation (SUM, MEAN, ONLY_FIRST_REPLICA), as in TensorFlow:

    >>> strategy = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    >>> with strategy.scope():
    ...     v = md.Variable(1.0, aggregation=md.VariableAggregation.SUM)
    >>> strategy.experimental_local_results(v)   # one value, not one per replica
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation
from multidev.values import context
from multidev.values.variables import MirroredVariable, _variable_repr

_AGGREGATION_NEEDED = (
    "You must specify an aggregation method to update a variable of a CentralStorageStrategy in "
    "replica context (inside strategy.run), got aggregation={aggregation}. Pass one when creating it, "
    "e.g. md.Variable(..., aggregation=md.VariableAggregation.SUM) (SUM, MEAN or ONLY_FIRST_REPLICA): "
    "the one copy is updated with the replicas' aggregated values. Or update it in cross-replica "
    "context: md.distribute.get_replica_context().merge_call(fn) and strategy.extended.update(v, ...)."
)


class AggregatingVariable(MirroredVariable):
    """One copy of a variable on the parameter device; replica writes are aggregated (TF's
    ``AggregatingVariable``)."""

    @property
    def values(self) -> tuple:
        """The one copy (TensorFlow's ``experimental_local_results`` gives ``(v,)``)."""
        return (self,)

    def _local_variables(self) -> tuple:
        return (self,)

    def _reduce_parts(self) -> None:
        return None   # reduced like a plain tensor: MEAN gives the value, SUM across replicas raises

    def _update(self, op: str, value: Any):
        if context.current_replica_id() is not None and self.aggregation is VariableAggregation.NONE:
            raise ValueError(_AGGREGATION_NEEDED.format(aggregation=self.aggregation.name))
        return super()._update(op, value)

    def _mark_synced(self) -> None:
        if self._share_storage:
            super()._mark_synced()
        # Separate compute devices: the next strategy.run copies the value to every replica's
        # device (what TensorFlow's replicas do when they read the central variable).

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            return _variable_repr(self._tf_name, self._components[0])


__all__ = ["AggregatingVariable"]
