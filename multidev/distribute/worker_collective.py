"""How a strategy's replicas meet the other worker processes' replicas: injected, not overridden.

Every strategy's ``extended`` holds one ``WorkerCollective``: ``LocalWorkers`` (one process: the
cross-worker steps are identities, replica collectives stay in process) or ``ProcessWorkers``
(``MultiWorkerMirroredStrategy``: hierarchical collectives over a ``ProcessCollective``, the chief's
initial values broadcast to every worker).

    >>> strategy.extended.worker_collective.sum(torch.ones(2))   # one process: the tensor itself
    tensor([1., 1.])
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Sequence, final

import torch

from multidev._core.enums import ReduceOp
from multidev.collectives import algorithms
from multidev.collectives.process_config import default_timeout_seconds

if TYPE_CHECKING:  # pragma: no cover
    from multidev.collectives.process import ProcessCollective
    from multidev.distribute.cross_device_ops import CrossDeviceOps


class WorkerCollective(abc.ABC):
    """Collectives across worker processes (satisfies ``values.strategy_protocol.WorkerCollectiveLike``).

    ``sum``/``gather``/``broadcast`` take this process's one tensor; ``all_reduce``/``all_gather``
    take one tensor per local replica and return each local replica's share of the job-wide result.
    """

    @property
    @abc.abstractmethod
    def num_workers(self) -> int:
        """Worker processes in the job."""

    @property
    @abc.abstractmethod
    def worker_index(self) -> int:
        """This process's index among the workers (0: the chief)."""

    @property
    @abc.abstractmethod
    def spans_processes(self) -> bool:
        """Whether collectives leave the process (then in-process shortcuts must not be taken)."""

    @property
    @abc.abstractmethod
    def timeout_seconds(self) -> float:
        """The bound on every collective wait, in process and across processes."""

    @property
    def calls_made(self) -> int:
        """Collectives across processes entered so far (a run that made one ran on every worker)."""
        return 0

    @property
    def is_chief(self) -> bool:
        """Whether this process does the chief's duties (checkpoints, summaries)."""
        return self.worker_index == 0

    @abc.abstractmethod
    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of every worker's ``tensor``."""

    @abc.abstractmethod
    def gather(self, tensor: torch.Tensor, axis: int) -> torch.Tensor:
        """Every worker's ``tensor`` concatenated along ``axis``, in worker order."""

    @abc.abstractmethod
    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """The chief's ``tensor`` on every worker."""

    @abc.abstractmethod
    def all_reduce(self, op: ReduceOp, tensors: Sequence[torch.Tensor], devices: Sequence[torch.device],
                   private: bool, local_ops: "CrossDeviceOps") -> list[torch.Tensor]:
        """Reduce one tensor per local replica over every replica of the job; one result per replica
        (``private``: results must not alias each other)."""

    @abc.abstractmethod
    def all_gather(self, tensors: Sequence[torch.Tensor], axis: int,
                   devices: Sequence[torch.device]) -> list[torch.Tensor]:
        """Concatenate every replica's tensor of the job along ``axis``; one result per local replica."""

    @abc.abstractmethod
    def broadcast_initial_values(self, primaries: Sequence[torch.Tensor]) -> None:
        """Overwrite new variables' values (in place) with the chief's, so workers start identical."""


@final
class LocalWorkers(WorkerCollective):
    """One worker process: the null collective (cross-worker steps are identities)."""

    num_workers = 1
    worker_index = 0
    spans_processes = False

    def __init__(self, timeout_seconds: float | None = None):
        self._timeout = default_timeout_seconds() if timeout_seconds is None else timeout_seconds

    @property
    def timeout_seconds(self) -> float:
        return self._timeout

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def gather(self, tensor: torch.Tensor, axis: int) -> torch.Tensor:
        return tensor

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def all_reduce(self, op, tensors, devices, private, local_ops):
        _synchronize(tensors)
        results = local_ops._all_reduce(op, tensors, devices, private)
        _synchronize(results)
        return results

    def all_gather(self, tensors, axis, devices):
        _synchronize(tensors)
        results = algorithms.all_gather(tensors, axis, devices)
        _synchronize(results)
        return results

    def broadcast_initial_values(self, primaries: Sequence[torch.Tensor]) -> None:
        return None


@final
class ProcessWorkers(WorkerCollective):
    """Several worker processes joined by a ``ProcessCollective``: local replicas reduce in process
    first, then one cross-process call, then the result goes back to the local replicas."""

    spans_processes = True

    def __init__(self, process: "ProcessCollective"):
        self._process = process

    @property
    def process(self) -> "ProcessCollective":
        """The ``ProcessCollective`` joining the workers."""
        return self._process

    @property
    def num_workers(self) -> int:
        return self._process.world_size

    @property
    def worker_index(self) -> int:
        return self._process.rank

    @property
    def timeout_seconds(self) -> float:
        return self._process.timeout_seconds

    @property
    def calls_made(self) -> int:
        return self._process.calls_made

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.layout == torch.sparse_coo:
            return self._sum_sparse(tensor)
        return self._process.all_reduce(tensor.clone(), ReduceOp.SUM)

    def _sum_sparse(self, tensor: torch.Tensor) -> torch.Tensor:
        """A sparse buffer's sum over the workers (a GCN's adjacency read outside ``strategy.run``): every
        worker's entries gathered (their counts may differ), summed where they meet."""
        mine = tensor.coalesce()
        indices = self._process.all_gather(mine.indices().t().contiguous())
        values = self._process.all_gather(mine.values().contiguous())
        return torch.sparse_coo_tensor(torch.cat(indices).t(), torch.cat(values), tensor.shape).coalesce()

    def gather(self, tensor: torch.Tensor, axis: int) -> torch.Tensor:
        moved = tensor.movedim(axis, 0).contiguous()
        parts = self._process.all_gather(moved)
        return torch.cat(parts, dim=0).movedim(0, axis)

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._process.broadcast(tensor.contiguous(), src=0)

    def all_reduce(self, op, tensors, devices, private, local_ops):
        # One local replica: reduce a copy in place and hand it back as is; several: sum them first.
        local = tensors[0].clone() if len(tensors) == 1 else algorithms.reduce_to_one(tensors, ReduceOp.SUM, devices[0])
        self._process.all_reduce(local, ReduceOp.SUM)
        if op is ReduceOp.MEAN:
            local = _divide(local, len(devices) * self.num_workers)
        if len(tensors) == 1:
            return [local]
        return algorithms.broadcast(local, devices, private=private)

    def all_gather(self, tensors, axis, devices):
        local = torch.cat([t.to(devices[0]) for t in tensors], dim=axis)
        return algorithms.broadcast(self.gather(local, axis), devices, private=True)

    def broadcast_initial_values(self, primaries: Sequence[torch.Tensor]) -> None:
        if not primaries:
            return
        with torch.no_grad():   # same creation order on every worker: one flat broadcast per dtype
            by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
            for p in primaries:
                if p.layout == torch.sparse_coo:   # a sparse buffer (a GCN's adjacency): its own broadcasts
                    self._broadcast_sparse(p)
                else:
                    by_dtype.setdefault(p.dtype, []).append(p)
            for group in by_dtype.values():
                flat = self._process.broadcast(torch.cat([p.detach().reshape(-1) for p in group]), src=0)
                offset = 0
                for p in group:
                    p.copy_(flat[offset:offset + p.numel()].view(p.shape))
                    offset += p.numel()

    def _broadcast_sparse(self, p: torch.Tensor) -> None:
        """The chief's sparse COO tensor into ``p``: its number of entries, then its indices and values."""
        mine = p.coalesce()
        nnz = int(self._process.broadcast(torch.tensor([mine._nnz()], device=p.device), src=0)[0])
        same = mine._nnz() == nnz
        indices = mine.indices() if same else mine.indices().new_empty((mine.sparse_dim(), nnz))
        values = mine.values() if same else mine.values().new_empty((nnz, *mine.values().shape[1:]))
        indices, values = self._process.broadcast(indices.contiguous(), src=0), self._process.broadcast(
            values.contiguous(), src=0)
        p.copy_(torch.sparse_coo_tensor(indices, values, p.shape, is_coalesced=True))


def _synchronize(tensors: Sequence[torch.Tensor]) -> None:
    """In-process collectives combine tensors written on other replicas' streams: wait for those devices."""
    for device in {t.device for t in tensors if t.device.type == "cuda"}:
        torch.cuda.synchronize(device)


def _divide(total: torch.Tensor, n: int) -> torch.Tensor:
    """MEAN after a SUM: floor division for integers, as the replica all-reduce keeps the dtype."""
    if total.is_floating_point() or total.is_complex():
        return total / n
    return torch.div(total, n, rounding_mode="floor")


__all__ = ["WorkerCollective", "LocalWorkers", "ProcessWorkers"]
