"""Who sums a step's gradients across replicas: one reducer per (strategy, optimizer), chosen once.

``choose`` is the one place that decides; the optimizer's plan (``optimizer_hooks``) caches the
result (a Keras optimizer's ``replica_rules`` theirs), and both update paths call the same object:

* a Keras optimizer (``keras/optimizers/base.py``) sums in ``aggregate`` before clipping (Keras
  sums, then clips), then calls ``before_step`` inside ``summed()``; or, when ``sums_in_step`` and
  nothing needs the sums first, calls ``before_step`` to sum; then it steps the replica's own
  update rule (``keras/optimizers/replica_rules.py``: no torch step hooks) and calls ``after_step``;
* ``optimizer.step()`` of any ``torch.optim`` optimizer runs ``before_step`` / ``after_step``
  (torch's global step hooks, installed by ``optimizer_hooks``).

The choice, first match wins:

1. ``IDENTITY`` (a null object): one replica in sync, or no distributed variable: the gradients
   already are the sums.
2. ``SplitUpdate``: replicas of one process on one CPU with their own copies and an element-wise
   ``torch.optim`` optimizer (``optimizer_shards``): each variable's owner sums and updates it,
   then copies it to the other replicas.
3. ``SharedStorageUpdate``: ``CentralStorageStrategy`` whose replicas share one storage: summed in
   buckets, replica 0 alone applies the update, all meet after it.
4. ``BucketedAllReduce``: anything else: flat buckets all-reduced by the strategy's collective (in
   process, and across processes with ``MultiWorkerMirroredStrategy``; ``gradient_buckets``).

Example (what the hooks do, for one replica's step)::

    reducer = choose(optimizer, params, strategy)
    reducer.before_step(replica_id)   # this replica's .grad are now the sums it applies
    optimizer.step()
    reducer.after_step(replica_id)
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator, Sequence

import torch

from multidev._core.enums import ReduceOp
from multidev.distribute.gradient_buckets import GradientBuckets
from multidev.distribute.optimizer_shards import OptimizerShards, can_shard
from multidev.values.context import current_replica_context, current_replica_id
from multidev.values.variables import DistributedVariable


def local_copy(param: Any, replica_id: int) -> torch.Tensor:
    """Replica ``replica_id``'s tensor of ``param`` (a plain tensor is every replica's)."""
    return param._components[replica_id] if isinstance(param, DistributedVariable) else param


class GradientReducer:
    """The identity (null object): gradients need no summing. Base of every reducer.

    ``aggregate`` sums gradients handed in (the Keras path); ``before_step`` makes this replica's
    ``.grad`` the sums it applies, unless ``summed()`` says they already are; ``after_step`` runs
    once the update rule has run.
    """

    sums_in_step = False  # before_step sums each gradient only where it is applied (split update)

    def aggregate(self, variables: Sequence[Any], grads: Sequence[torch.Tensor]) -> list:
        """``grads`` of ``variables`` (this replica's), summed across replicas."""
        return list(grads)

    @contextlib.contextmanager
    def summed(self) -> Iterator[None]:
        """Within this block, this replica's gradients already are sums (``aggregate`` made them)."""
        yield

    def in_summed(self) -> bool:
        """Whether this replica is inside ``summed()``."""
        return False

    def before_step(self, replica_id: int) -> None:
        """Called in replica context before ``optimizer.step()`` updates this replica's copies."""

    def after_step(self, replica_id: int) -> None:
        """Called in replica context after ``optimizer.step()``."""

    def close(self) -> None:
        """Release what the reducer holds (hooks on tensors) when its optimizer's variables change."""


IDENTITY = GradientReducer()


class BucketedAllReduce(GradientReducer):
    """Sum in flat buckets (one collective per bucket, buffers reused): every replica then applies
    the identical update to its own copy."""

    def __init__(self, params: Sequence[Any], strategy: Any):
        self._refs = [[local_copy(p, r) for p in params] for r in range(len(strategy.extended.replica_group.devices))]
        self._step_buckets = GradientBuckets(strategy.extended.replica_group.bucket_bytes)
        self._aggregate_buckets = GradientBuckets(strategy.extended.replica_group.bucket_bytes)
        self._summed = [False] * len(self._refs)  # per local replica: inside summed()

    def aggregate(self, variables: Sequence[Any], grads: Sequence[torch.Tensor]) -> list:
        ctx = current_replica_context()
        if ctx is None:  # cross-replica: nothing to sum (a step there is refused)
            return list(grads)
        refs = [local_copy(v, current_replica_id()) for v in variables]
        return self._aggregate_buckets.all_reduce(ctx, refs, grads, ReduceOp.SUM)

    @contextlib.contextmanager
    def summed(self) -> Iterator[None]:
        r = current_replica_id()
        if r is None:
            yield
            return
        self._summed[r] = True
        try:
            yield
        finally:
            self._summed[r] = False

    def in_summed(self) -> bool:
        r = current_replica_id()
        return r is not None and self._summed[r]

    def before_step(self, replica_id: int) -> None:
        if not self._summed[replica_id]:
            self._set_grads(self._refs[replica_id], self._sum_step_gradients(replica_id))

    def _sum_step_gradients(self, replica_id: int) -> list:
        refs = self._refs[replica_id]
        return self._step_buckets.all_reduce(current_replica_context(), refs, [t.grad for t in refs], ReduceOp.SUM)

    @staticmethod
    def _set_grads(refs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None]) -> None:
        for t, g in zip(refs, grads):
            t.grad = g


class SharedStorageUpdate(BucketedAllReduce):
    """Replicas share one storage (``CentralStorageStrategy``): replica 0 alone applies the summed
    update; no replica reads a parameter again before it is done."""

    def before_step(self, replica_id: int) -> None:
        if self._summed[replica_id] and len(self._refs) > 1:
            # Gradients reduced in backward: no collective here, so meet before replica 0 writes the one
            # storage that every replica may still read between its backward pass and its step.
            current_replica_context()._barrier("optimizer.step.before")
        super().before_step(replica_id)
        if replica_id != 0:
            for t in self._refs[replica_id]:
                t.grad = None

    def after_step(self, replica_id: int) -> None:
        if len(self._refs) > 1:
            current_replica_context()._barrier("optimizer.step")


class SplitUpdate(BucketedAllReduce):
    """Replicas on one CPU split an element-wise update (``optimizer_shards``): each variable's
    owner sums its gradients, the optimizer updates only owned copies, the owner copies them out."""

    sums_in_step = True

    def __init__(self, params: Sequence[Any], strategy: Any):
        super().__init__(params, strategy)
        self.shards = OptimizerShards(params, len(self._refs))

    def before_step(self, replica_id: int) -> None:
        self.shards.reduce(current_replica_context(), replica_id, self._summed[replica_id])

    def after_step(self, replica_id: int) -> None:
        self.shards.publish(replica_id)
        if len(self._refs) > 1:
            current_replica_context()._barrier("optimizer.step")


def choose(optimizer: torch.optim.Optimizer, params: Sequence[Any], strategy: Any) -> GradientReducer:
    """The reducer for ``optimizer`` over ``params``, variables of ``strategy`` (see the module docstring)."""
    extended = strategy.extended
    if strategy.num_replicas_in_sync == 1 or not any(isinstance(p, DistributedVariable) for p in params):
        return IDENTITY
    if can_shard(optimizer, extended, strategy.num_replicas_in_sync):
        return SplitUpdate(params, strategy)
    if extended.replica_group.shared_storage:
        return SharedStorageUpdate(params, strategy)
    # (A torch loop's loss.backward() reduced its gradients already, overlapping the cross-process
    # all-reduce with backward where it can: backward_reduce.py. Nothing is left to overlap here.)
    return BucketedAllReduce(params, strategy)


_own_rule_reducers: "weakref.WeakKeyDictionary[Any, GradientReducer]" = weakref.WeakKeyDictionary()
_own_rule_lock = threading.Lock()


def for_own_update_rules(strategy: Any) -> GradientReducer:
    """The reducer of optimizers that apply their own update rule, never a ``torch.optim`` step
    (Keras 3's): they only ``aggregate``, so it sums in buckets (``IDENTITY`` for one replica).
    One per strategy, so an optimizer wrapping another (a loss-scale optimizer) sees the inner
    optimizer's gradients as ``in_summed()``."""
    reducer = _own_rule_reducers.get(strategy)
    if reducer is None:
        with _own_rule_lock:
            reducer = _own_rule_reducers.get(strategy)
            if reducer is None:
                reducer = IDENTITY if strategy.num_replicas_in_sync == 1 else BucketedAllReduce([], strategy)
                _own_rule_reducers[strategy] = reducer
    return reducer


# --- the split update's pieces for update rules that are no torch.optim optimizer (Keras 3's) -------

def splits_own_update_rules(strategy: Any) -> bool:
    """Whether an element-wise update rule that is no ``torch.optim`` optimizer (Keras 3's) may be
    split across ``strategy``'s replicas as ``SplitUpdate`` splits torch's: replicas of one process
    on one CPU, each with its own copies (``optimizer_shards.can_shard``'s condition)."""
    extended = strategy.extended
    n = strategy.num_replicas_in_sync
    return (n > 1 and extended.replica_group.cooperative_reduce and not extended.replica_group.shared_storage
            and n == extended.replica_group.size)


def exchange_among_replicas(ctx: Any, name: str, payload: Any) -> list:
    """Every local replica's ``payload``, in replica order, returned on every replica (a rendezvous
    of the replicas of one process, as ``OptimizerShards.reduce`` exchanges gradients)."""
    return ctx.strategy.extended.replica_group.exchange(
        ctx._global_replica_id, (name,), payload, lambda payloads: [payloads] * len(payloads))


def barrier(ctx: Any, name: str) -> None:
    """Wait until every local replica reached this point (after a split update's copies)."""
    ctx._barrier(name)
