"""``md.Variable`` and its distributed forms ``MirroredVariable`` and ``SyncOnReadVariable``.

A ``Variable`` is a ``torch.nn.Parameter`` with TensorFlow's ``assign`` API, so it works anywhere
torch expects a parameter. Under a strategy's ``scope()``, ``md.Variable(...)`` (and every module
parameter, see ``multidev.distribute.module_hooks``) becomes a ``DistributedVariable``: its own
storage is replica 0's copy and ``_components`` holds one leaf tensor per replica. Inside
``strategy.run`` a replica sees only its component; writes follow ``VariableAggregation``:

* NONE: the replica's own copy only (copies drift apart);
* SUM / MEAN: the replicas' values are reduced, then every copy is updated with the result;
* ONLY_FIRST_REPLICA: replica 0's value updates every copy.

This module holds those two synchronization policies (``MirroredVariable``, ``SyncOnReadVariable``)
and is the import path of every variable name: the plain ``md.Variable`` lives in
``base_variable.py`` and the replica machinery both policies share (``DistributedVariable``,
``local_view``) in ``distributed_variable.py``; both are re-exported here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation, VariableSynchronization  # noqa: F401
from multidev.values import context
from multidev.values.base_variable import (  # noqa: F401  (the public import path of every variable name)
    _UPDATES, Variable, _as_tensor, _default_name, _variable_repr)
from multidev.values.distributed import AnyDistributedValue, DistributedValues, PerReplica  # noqa: F401
from multidev.values.distributed_variable import (  # noqa: F401
    DistributedVariable, _substitute, local_view, variable_of)
from multidev.values.strategy_protocol import StrategyLike


class MirroredVariable(DistributedVariable):
    """Copies kept equal on every replica (``synchronization=ON_WRITE``): writes are aggregated."""

    def _update(self, op: str, value: Any):
        replica_id = context.current_replica_id()
        n = len(self._components)
        if replica_id is None:
            if isinstance(value, PerReplica):
                for r, v in enumerate(value.values):
                    self._apply_to([r], op, v)
            else:
                self._apply_to(range(n), op, value)
            return self
        if self.aggregation is VariableAggregation.NONE or n == 1:
            self._apply_to([replica_id], op, value)
            return self._replica_result(replica_id)
        context.current_replica_context().merge_call(_merged_update, args=(self, op, value))
        return self._replica_result(replica_id)


def _merged_update(strategy: StrategyLike, var: MirroredVariable, op: str, value: Any) -> None:
    """Cross-replica half of an aggregated write: reduce the replicas' values, update every copy."""
    n = len(var._components)
    agg = var.aggregation
    if isinstance(value, PerReplica):
        parts = [var._coerce(v, var._components[0], op) for v in value.values]
    else:
        tensor = var._coerce(value, var._components[0], op)
        if agg is VariableAggregation.SUM and bool(torch.any(tensor != 0)):
            raise ValueError(
                f"A non-DistributedValues value {value!r} cannot be reduced with the given reduce op "
                f"ReduceOp.SUM: every replica wrote the same object to {var._tf_name!r} (aggregation SUM), which "
                "would count it once per replica. Write a value computed in the replica (a tensor), use "
                "aggregation MEAN or ONLY_FIRST_REPLICA, or assign in cross-replica context.")
        parts = [tensor] * n
    if agg is VariableAggregation.ONLY_FIRST_REPLICA:
        reduced = strategy.extended.worker_collective.broadcast(parts[0].clone())
    else:  # the strategy's reduce spans every worker's replicas
        reduced = strategy.reduce(agg.name, PerReplica(parts), axis=None).to(parts[0].dtype)
    var._apply_to(range(n), op, reduced)


class SyncOnReadVariable(DistributedVariable):
    """Copies updated locally by each replica and reduced when read in cross-replica context
    (``synchronization=ON_READ``), as Keras metrics and batch-norm statistics use."""

    _reduce_in_backward = False

    def _reduced(self) -> torch.Tensor:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            agg = self.aggregation
            if agg is VariableAggregation.NONE:
                raise ValueError(
                    f"Could not convert from `md.VariableAggregation` {agg} to `md.distribute.ReduceOp` type: "
                    f"SyncOnReadVariable {self._tf_name!r} (aggregation NONE) has no value outside strategy.run. Read "
                    "it inside strategy.run (each replica's own copy), read strategy.experimental_local_results(v), "
                    "or create it with aggregation SUM, MEAN or ONLY_FIRST_REPLICA.")
            if agg is VariableAggregation.ONLY_FIRST_REPLICA or self._strategy.num_replicas_in_sync == 1:
                return self._components[0]
            components = [c.detach() for c in self._components]
            return self._strategy.reduce(agg.name, PerReplica(components), axis=None).to(components[0].dtype)

    def _view_for(self, replica_id: int | None) -> torch.Tensor:
        if replica_id is None:
            return self._reduced()
        return self._components[replica_id]

    def _sync_if_stale(self) -> None:  # copies are independent by design
        self._mark_synced()

    def _copies_must_agree(self) -> bool:  # each replica writes its own copy by design
        return False

    def _check_replica_writes(self, unversioned: bool = False) -> None:
        self._mark_synced()

    def _update(self, op: str, value: Any):
        replica_id = context.current_replica_id()
        if replica_id is not None:
            self._apply_to([replica_id], op, value)
            return self._replica_result(replica_id)
        n = len(self._components)
        if self.aggregation is VariableAggregation.SUM and op == "assign":
            # Reading back sums the copies of every worker, so each copy holds an equal share.
            tensor = self._coerce(value, self._components[0])
            total = self._strategy.num_replicas_in_sync
            share = tensor / total if tensor.is_floating_point() else tensor // total
            self._apply_to(range(n), op, share)
            return self
        if self.aggregation is VariableAggregation.SUM and op != "assign":
            raise ValueError(
                f"SyncOnReadVariable {self._tf_name!r} with aggregation SUM does not support {op} in "
                "cross-replica context: the delta cannot be split between replicas. Use assign(), "
                "or update it inside strategy.run."
            )
        self._apply_to(range(n), op, value)
        return self
