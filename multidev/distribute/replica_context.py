"""``ReplicaContext``: what a replica function sees through ``md.distribute.get_replica_context()``."""

from __future__ import annotations

import contextvars
from typing import Any, Callable

import torch

from multidev._core.enums import ReduceOp
from multidev._core.errors import FailedPreconditionError
from multidev.collectives import algorithms
from multidev.distribute.backward_reduce import IN_BACKWARD
from multidev.values import context
from multidev.values.distributed import flatten, local_value, pack_as, regroup


def _signature_of(leaves: list) -> tuple:
    return tuple((tuple(t.shape), str(t.dtype)) if isinstance(t, torch.Tensor) else type(t).__name__ for t in leaves)


# Below this many bytes one replica reducing for all (one meeting) beats splitting the work
# (two meetings); above it, splitting the memory traffic across the replicas' cores wins.
COOPERATIVE_MIN_BYTES = 256 * 1024


def _worth_cooperating(leaves: list) -> bool:
    return sum(t.numel() * t.element_size() for t in leaves) >= COOPERATIVE_MIN_BYTES


def _as_tensor(value: Any) -> torch.Tensor:
    """A collective's input leaf as a tensor; ValueError (TF's type) for what is no number or tensor."""
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"Attempt to convert a value ({value!r}) with an unsupported type ({type(value)}) to a tensor "
                         f"for a cross-replica collective; pass tensors, numbers or nested lists/tuples/dicts of "
                         f"them.") from None


class ReplicaContext:
    """The calling replica's view of its strategy: its id, the replica count and collectives.

    Example:
        >>> def step(x):
        ...     ctx = md.distribute.get_replica_context()
        ...     return ctx.all_reduce("SUM", x)
    """

    def __init__(self, strategy: Any, replica_id_in_sync_group: int, group: Any = None):
        self._strategy = strategy
        self._replica_id = replica_id_in_sync_group
        self._group = group   # the strategy's ReplicaGroup (replica_group.py); None for the default strategy

    @property
    def strategy(self) -> Any:
        return self._strategy

    @property
    def replica_id_in_sync_group(self) -> torch.Tensor:
        """This replica's id among all replicas of all workers: an int32 scalar tensor, as TensorFlow
        returns (so ``.numpy()`` works, as the seed notebook calls it; ``int()``, indexing and ``==``
        work as on an int). multidev's own code uses ``_global_replica_id`` (an int)."""
        return torch.tensor(self._global_replica_id, dtype=torch.int32, device="cpu")   # .numpy() on any device

    @property
    def _global_replica_id(self) -> int:
        return self._strategy.extended.replica_offset + self._replica_id

    @property
    def _local_replica_id(self) -> int:
        """Index of this replica among this process's replicas (its variable components)."""
        return self._replica_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    @property
    def devices(self) -> tuple[str, ...]:
        return (self._strategy.extended.worker_devices[self._replica_id],)

    def _single(self) -> bool:
        return self._strategy.num_replicas_in_sync == 1

    def all_reduce(self, reduce_op: ReduceOp | str, value: Any, options: Any = None) -> Any:
        """Reduce ``value`` (a tensor or nested structure of tensors) across replicas; all get the result."""
        op = ReduceOp.from_value(reduce_op)
        leaves = [_as_tensor(v) for v in flatten(value)]
        if self._single():
            return pack_as(value, leaves)
        if torch.is_grad_enabled() and any(t.requires_grad for t in leaves):
            # Differentiable: the gradient of an all-reduce is the all-reduce of the gradients.
            return pack_as(value, list(_AllReduce.apply(self, op, *leaves)))
        return pack_as(value, self._all_reduce_leaves(op, [t.detach() for t in leaves]))

    def _all_reduce_leaves(self, op: ReduceOp, leaves: list) -> list:
        """Each replica gets private reduced copies of ``leaves``."""
        if self._group.cooperative_reduce and _worth_cooperating(leaves):
            leaves = [t.contiguous() for t in leaves]
            return self._cooperative_all_reduce(op, leaves, [torch.empty_like(t) for t in leaves])
        return self._all_reduce_by_one(op, leaves)

    def _all_reduce_owned(self, op: ReduceOp, tensor: torch.Tensor) -> torch.Tensor:
        """All-reduce a buffer this replica owns, in place (gradient buckets); cooperative where the
        replicas share one CPU (``_cooperative_all_reduce``), nothing allocated."""
        if self._single():
            return tensor
        if not self._group.cooperative_reduce or not tensor.is_contiguous():
            return self._all_reduce_leaves(op, [tensor])[0]
        return self._cooperative_all_reduce(op, [tensor], [tensor])[0]

    def _cooperative_all_reduce(self, op: ReduceOp, leaves: list, outputs: list) -> list:
        """Replicas sharing one CPU (logical devices of one process) reduce together: each sums its
        own slice of every replica's tensors and writes it into every replica's output, so the
        work and the memory traffic are split across the replica threads."""
        group = self._group
        n, r = group.size, self._replica_id
        everyone = group.share(r, ("all_reduce", op.name, *_signature_of(leaves)), (leaves, outputs))
        try:
            for i, leaf in enumerate(leaves):
                inputs = [p[0][i].view(-1) for p in everyone]
                part = algorithms.replica_slice(leaf.numel(), r, n)
                if part.start < part.stop:
                    algorithms.reduce_slice(inputs, [p[1][i].view(-1) for p in everyone], part, op)
        finally:  # no replica returns (and reuses its buffers) while another still writes into them
            group.barrier(r, "all_reduce.done")
        return outputs

    def _all_reduce_by_one(self, op: ReduceOp, leaves: list) -> list:
        extended = self._strategy.extended

        def combine(payloads: list) -> list:
            per_leaf = [extended.all_reduce_tensors(op, [p[i] for p in payloads], private=True)
                        for i in range(len(leaves))]
            return [[column[r] for column in per_leaf] for r in range(len(payloads))]

        return self._group.exchange(self._replica_id, ("all_reduce", op.name, *_signature_of(leaves)), leaves, combine)

    def all_gather(self, value: Any, axis: int, options: Any = None) -> Any:
        """Concatenate every replica's ``value`` along ``axis``; all replicas get the result.

        Differentiable, as TensorFlow's: a replica's gradient is the sum of every replica's gradient
        of the gathered tensor, at its own slice (a SimCLR loss against every replica's embeddings
        trains as one device's on the global batch; DDP programs write a ``GatherLayer`` for it)."""
        leaves = [_as_tensor(v) for v in flatten(value)]
        for t in leaves:
            if t.dim() == 0:
                raise ValueError("all_gather needs tensors of rank >= 1; got a scalar. Reshape it to [1] first.")
        if self._single():
            return pack_as(value, leaves)
        if torch.is_grad_enabled() and any(t.requires_grad for t in leaves):
            return pack_as(value, list(_AllGather.apply(self, axis, *leaves)))
        return pack_as(value, self._all_gather_leaves(axis, [t.detach() for t in leaves]))

    def _all_gather_leaves(self, axis: int, leaves: list) -> list:
        extended = self._strategy.extended
        signature = ("all_gather", axis, *(
            (tuple(s for i, s in enumerate(t.shape) if i != axis % t.dim()), str(t.dtype)) for t in leaves))

        def combine(payloads: list) -> list:
            per_leaf = [extended.all_gather_tensors([p[i] for p in payloads], axis) for i in range(len(leaves))]
            return [[column[r] for column in per_leaf] for r in range(len(payloads))]

        return list(self._group.exchange(self._replica_id, signature, leaves, combine))

    def merge_call(self, merge_fn: Callable, args: tuple = (), kwargs: dict | None = None) -> Any:
        """Pause all replicas and run ``merge_fn(strategy, *args, **kwargs)`` once in cross-replica context.

        Arguments that differ between replicas reach ``merge_fn`` as ``PerReplica`` values; each
        replica gets its own component of the result.
        """
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"merge_call args must be a tuple, got {type(args).__name__}: {args!r}.")
        kwargs = kwargs or {}
        strategy = self._strategy
        if self._group is None or self._group.size == 1:
            return local_value(_in_cross_replica(merge_fn, strategy, args, kwargs), 0)

        def combine(payloads: list) -> list:
            merged_args, merged_kwargs = regroup([p for p in payloads])
            result = _in_cross_replica(merge_fn, strategy, merged_args, merged_kwargs)
            return [local_value(result, r) for r in range(len(payloads))]

        name = getattr(merge_fn, "__qualname__", type(merge_fn).__name__)
        return self._group.exchange(self._replica_id, ("merge_call", name), (tuple(args), dict(kwargs)), combine)

    def _barrier(self, name: str) -> None:
        if self._group is not None:
            self._group.barrier(self._replica_id, name)

    def __repr__(self) -> str:
        return f"ReplicaContext(replica_id_in_sync_group={self._replica_id}, num_replicas_in_sync={self.num_replicas_in_sync})"


class _AllReduce(torch.autograd.Function):
    """All-reduce with a backward pass (each replica's backward meets the others' in its thread)."""

    @staticmethod
    def forward(ctx, replica_context, op, *leaves):
        ctx.replica_context, ctx.op = replica_context, op
        ctx.likes = [(t.shape, t.dtype, t.device) for t in leaves]
        return tuple(replica_context._all_reduce_leaves(op, [t.detach() for t in leaves]))

    @staticmethod
    def backward(ctx, *grads):
        _refuse_a_shared_engine_thread(ctx.replica_context, "all_reduce")
        grads = [torch.zeros(s, dtype=d, device=v) if g is None else g for g, (s, d, v) in zip(grads, ctx.likes)]
        return (None, None, *ctx.replica_context._all_reduce_leaves(ctx.op, list(grads)))


class _AllGather(torch.autograd.Function):
    """All-gather with TensorFlow's gradient: the all-reduced (summed) gradient of the gathered
    tensor, this replica's slice of it. Every replica's length along ``axis`` travels with the
    leaves (one meeting), so each finds its offset also where the lengths differ."""

    @staticmethod
    def forward(ctx, replica_context, axis, *leaves):
        ctx.replica_context, ctx.axis = replica_context, axis
        ctx.likes = [(t.shape, t.dtype, t.device) for t in leaves]
        *gathered, lengths = replica_context._all_gather_leaves(
            axis, [t.detach() for t in leaves] + [_lengths_leaf(leaves, axis)])
        lengths = lengths.movedim(axis % lengths.dim(), 0).reshape(-1, len(leaves))   # replicas x leaves
        ctx.offsets = lengths[:replica_context._global_replica_id].sum(0).tolist()
        ctx.gathered_shapes = [g.shape for g in gathered]
        return tuple(gathered)

    @staticmethod
    def backward(ctx, *grads):
        _refuse_a_shared_engine_thread(ctx.replica_context, "all_gather")
        grads = [torch.zeros(shape, dtype=d, device=v) if g is None else g.contiguous()
                 for g, shape, (_, d, v) in zip(grads, ctx.gathered_shapes, ctx.likes)]
        summed = ctx.replica_context._all_reduce_leaves(ReduceOp.SUM, grads)
        return (None, None, *(g.narrow(ctx.axis, offset, shape[ctx.axis])
                              for g, offset, (shape, _, _) in zip(summed, ctx.offsets, ctx.likes)))


def _refuse_a_shared_engine_thread(replica_context: ReplicaContext, name: str) -> None:
    """The gradient of a collective meets the other replicas in the middle of their backwards. Autograd runs a
    CUDA backward in one thread per physical GPU, for every caller: replicas on logical GPUs of one GPU would
    wait there for backwards queued behind their own (a hang until the collective timeout)."""
    if context.current_replica_id() is not None:   # the replica's own thread (CPU backward): they meet
        return
    if not IN_BACKWARD:   # no replica's thread is in loss.backward(): a backward outside strategy.run, in its caller
        return
    strategy, r = replica_context._strategy, replica_context._replica_id
    devices = list(strategy.extended.torch_devices)
    sharing = [i for i, d in enumerate(devices) if d == devices[r]]
    if len(sharing) > 1:
        raise FailedPreconditionError(
            f"ctx.{name} has a gradient, and replica {r}'s backward reached it (SyncBatchNorm's statistics, an "
            f"all_gather of features): it must meet the other replicas in the middle of their backwards. Replicas "
            f"{sharing} are logical devices of one {devices[r]}, and autograd runs every backward on {devices[r]} in "
            "one thread, so they cannot meet there. Give each replica a physical GPU of its own (no logical GPUs), "
            "or run one process per replica (`multidev launch --workers N` with MultiWorkerMirroredStrategy, as "
            "DDP runs one process per GPU), or stop the gradient (`.detach()` before the collective) where none "
            "is needed.")


def _lengths_leaf(leaves: list, axis: int) -> torch.Tensor:
    """The leaves' lengths along ``axis`` as one more leaf to gather: as many dimensions as the first
    leaf, the lengths along another dimension than ``axis`` (along it for a vector)."""
    ndim = leaves[0].dim()
    lengths = torch.tensor([t.shape[axis] for t in leaves], dtype=torch.int64, device=leaves[0].device)
    if ndim == 1:
        return lengths
    shape = [1] * ndim
    shape[(axis % ndim + 1) % ndim] = len(leaves)
    return lengths.reshape(shape)


#: The strategy whose ``merge_call`` function is running here (None elsewhere): a
#: ``call_for_each_replica`` inside it runs the replicas' calls in this thread (distribute_lib).
_MERGE_CALL_OF: contextvars.ContextVar[Any] = contextvars.ContextVar("multidev_merge_call_of", default=None)


def merge_call_strategy() -> Any:
    """The strategy whose ``merge_call`` function is running in this thread, or None."""
    return _MERGE_CALL_OF.get()


def _in_cross_replica(fn: Callable, strategy: Any, args, kwargs) -> Any:
    token = _MERGE_CALL_OF.set(strategy)
    try:
        with context.cross_replica(strategy):
            return fn(strategy, *args, **kwargs)
    finally:
        _MERGE_CALL_OF.reset(token)
