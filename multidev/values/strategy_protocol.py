"""What the values layer needs from a strategy: a typed, structural interface (no import of distribute/).

``md.Variable`` asks the strategy in scope to create distributed variables, a deep copy asks the
variable's strategy for a new one, and aggregated writes reduce through the strategy. These are
exactly the members of ``StrategyLike`` / ``VariableOwner`` / ``WorkerCollectiveLike`` below; every
strategy's ``strategy.extended`` (``multidev.distribute.StrategyExtended``) satisfies them:

    >>> isinstance(md.distribute.MirroredStrategy().extended, VariableOwner)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from multidev._core.enums import ReduceOp, VariableAggregation, VariableSynchronization

if TYPE_CHECKING:  # pragma: no cover
    from multidev.values.variables import DistributedVariable


@runtime_checkable
class WorkerCollectiveLike(Protocol):
    """Collectives over worker processes, one tensor per process (identities with one process)."""

    @property
    def num_workers(self) -> int:
        """Worker processes in the job (1 without a cluster)."""

    @property
    def worker_index(self) -> int:
        """This process's index among the workers (0: the chief)."""

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of every worker's ``tensor`` (a new tensor with several workers)."""

    def gather(self, tensor: torch.Tensor, axis: int) -> torch.Tensor:
        """Every worker's ``tensor`` concatenated along ``axis``, in worker order."""

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """The first worker's (the chief's) ``tensor`` on every worker."""


@runtime_checkable
class VariableOwner(Protocol):
    """The part of ``strategy.extended`` that creates and owns distributed variables."""

    @property
    def distributes_variables(self) -> bool:
        """Whether ``md.Variable(...)`` in this strategy's scope makes a distributed variable (False:
        a plain, placed ``md.Variable``, e.g. OneDeviceStrategy)."""

    @property
    def worker_collective(self) -> WorkerCollectiveLike:
        """Collectives across this strategy's worker processes."""

    def create_variable(self, initial_value: Any, *, trainable: bool, name: str | None, dtype: torch.dtype | None,
                        synchronization: VariableSynchronization, aggregation: VariableAggregation) -> Any:
        """The variable ``md.Variable(initial_value, ...)`` makes in this strategy's scope."""

    def create_distributed_variable(self, data: torch.Tensor, *, trainable: bool, name: str | None,
                                    synchronization: VariableSynchronization,
                                    aggregation: VariableAggregation) -> "DistributedVariable":
        """A distributed variable of this strategy holding ``data`` on every replica (no checks)."""

    def place_value(self, value: torch.Tensor) -> bool:
        """Move a non-distributed variable's tensor made in this strategy's scope to its device, in place."""

    def hook_new_variables(self) -> None:
        """Variables that need gradients now and were not hooked for reduction in backward join it (a
        variable unfrozen inside ``strategy.run`` reduces its gradients in that very run)."""


@runtime_checkable
class StrategyLike(Protocol):
    """The part of a ``md.distribute.Strategy`` that distributed variables call."""

    @property
    def extended(self) -> VariableOwner:
        """The strategy's device-level API (``strategy.extended``)."""

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas across every worker."""

    def reduce(self, reduce_op: ReduceOp | str, value: Any, axis: int | None) -> Any:
        """Reduce a per-replica value across every replica of every worker (cross-replica context)."""


__all__ = ["StrategyLike", "VariableOwner", "WorkerCollectiveLike"]
