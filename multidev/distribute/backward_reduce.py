"""Gradients reduced when ``loss.backward()`` returns, as DDP's reducer does.

A PyTorch program reads ``p.grad`` between ``backward()`` and ``optimizer.step()``: it clips
(``clip_grad_norm_``), logs norms, updates by hand (``p.data.add_(p.grad, alpha=-lr)``) or
accumulates several batches. Under DDP every one of those sees the gradient of the global batch,
because DDP's reducer all-reduces during backward and finishes before ``backward()`` returns. This
module gives multidev's replicas the same contract:

* every trainable mirrored variable's replica copies (leaf tensors) carry one hook, run before
  autograd accumulates into ``.grad``: it notes the leaf and what its ``.grad`` is, and queues a
  callback that autograd runs when this backward ends, in the replica's thread; the callback tells
  an accumulation (a new ``.grad``, or a bumped version of the old one) from a gradient only
  computed (``torch.autograd.grad`` leaves ``.grad`` alone). Accumulating (several backward passes,
  one step): a MEAN reduces the whole ``.grad``, as DDP does (the mean of an already reduced part,
  identical on every replica, is that part); a SUM would count it N times, so the hook sets the
  reduced part aside and only the new part is summed;
* the callback reduces the noted leaves' gradients across replicas (every replica's backward meets
  the others' there; a leaf some replica did not reach counts as zeros, one no replica reached stays
  None) and writes the result into every replica's ``.grad``; then it marks the replica's step
  ``SummedGrads`` so ``optimizer.step()`` applies them as they are (``optimizer_hooks``);
* the reduction is a MEAN (DDP's, for torch's mean losses) unless the replica's loss went through
  ``md.nn.compute_average_loss`` in this step, which scales by the global batch: then a SUM
  (TensorFlow's rule). ``ReplicaStep.loss_reduction`` carries the choice; replicas must agree.

``md.GradientTape`` / ``torch.autograd.grad`` paths (md.keras, TensorFlow-style loops) never
accumulate into ``.grad``, so they are untouched and keep TensorFlow's sum in ``apply_gradients``.
Keras 3 variables opt out (``_reduce_in_backward``): Keras's ``optimizer.apply`` sums them.

Replicas of one process on one CPU reduce in place, with no packing: each replica sums its share of
every gradient (slices of large tensors, whole small ones) over all replicas and writes it into
every replica's ``.grad``. Elsewhere (GPUs, several processes) gradients go through flat buckets
(``gradient_buckets``) and the strategy's collective.

Sparse gradients (``nn.Embedding(sparse=True)``, for ``SparseAdam``) stay sparse, as DDP keeps them:
on one CPU every replica sums the replicas' sparse tensors (the rows any replica touched); through
buckets they travel dense and come back sparse over the rows whose sum is not zero (a row whose
gradients cancel exactly to 0.0 is left out there).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import torch

from multidev._core.enums import ReduceOp
from multidev._core.never_compiled import never_compiled
from multidev.collectives import algorithms
from multidev.distribute.gradient_buckets import GradientBuckets
from multidev.distribute.replica_group import ReplicaGroup, RunningSteps
from multidev.placement.replica_random import ReplicaRandomMode
from multidev.values.context import ReplicaStep, current_replica_id
from multidev.values.gradients import SummedGrads

_queue_callback = torch.autograd.Variable._execution_engine.queue_callback
_mode_stack = torch.overrides._get_current_function_mode_stack


def _outside_replica_mode(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the replica's random mode off: the backward runs in it (``replica_random.
    backward_in_replica_mode``: hooks that draw), but the reduction at its end draws nothing, and the mode's
    dispatch costs about 1 us per op (a quarter of the scaling probe's step at N=2)."""
    stack = _mode_stack()
    if stack and isinstance(stack[-1], ReplicaRandomMode):
        with torch.overrides._pop_mode_temporarily():
            return fn(*args)
    return fn(*args)


# Ends of backward that run in the replica's thread, keyed by id(its ReplicaStep): autograd runs a CUDA backward
# (tensor hooks, callbacks queued with queue_callback) in one engine thread per physical GPU, shared by every
# caller. Logical GPUs of one GPU put every replica's backward on that thread, and a reduction waiting there for
# the others blocks their backwards behind it (a hang, seen on an H200). So a hook that runs off its replica's
# thread leaves the reduction here, and shared_leaves' backward wrapper runs it in the replica's thread when
# autograd's engine returns, before ``loss.backward()`` returns (where a queued callback would have run).
# ``torch.autograd.grad`` accumulates nothing: its end-of-backward meets nobody, and is queued as on CPU
# (IN_BACKWARD: id of a ReplicaStep whose thread is inside ``torch.autograd.backward`` -> how deep).
DEFERRED: dict[int, Any] = {}
IN_BACKWARD: dict[int, int] = {}

# A gradient at least this large is reduced in slices by every replica; a smaller one by one replica.
_SLICE_MIN_NUMEL = 16 * 1024

# id -> (weakref, replica, variable's weakref) of every replica copy a reducer hooked: ``shared_leaves``'
# check before a backward refuses one that another replica's backward would reach (``crossed_error``), before
# torch's "backward through the graph a second time" (the other replica's backward freed its part).
_HOOKED_COPIES: dict[int, tuple[weakref.ref, int, weakref.ref]] = {}


def hooked_copy_owner(tensor: torch.Tensor) -> tuple[int, Any] | None:
    """``(replica, variable)`` when ``tensor`` is a distributed variable's replica copy this module reduces."""
    entry = _HOOKED_COPIES.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        return None
    return entry[1], entry[2]()


def _forget_copy(key: int, ref: weakref.ref) -> None:
    entry = _HOOKED_COPIES.get(key)
    if entry is not None and entry[0] is ref:
        del _HOOKED_COPIES[key]


def crossed_error(here: int, owner: int, name: str) -> RuntimeError:
    """Replica ``here``'s backward reached replica ``owner``'s copy of ``name``: a consequence (``replica_run``)."""
    error = RuntimeError(
        f"Replica {here}'s loss.backward() reached replica {owner}'s copy of {name}: its loss used a tensor that "
        f"replica {owner}'s forward computed. The replicas are threads of one process, so a Python object the step "
        "writes (a list on a module the step appends to, as reinforce's `policy.saved_log_probs.append(...)`; a dict "
        "filled by a forward hook) is shared by all of them, where each DDP process has its "
        "own. Keep such state per replica (key it by md.distribute.get_replica_context().replica_id_in_sync_group: "
        "`policy.saved_log_probs[replica_id].append(...)`), keep it local to the step function, or return the "
        "tensor from forward.")
    error._md_consequence = True
    return error


class BackwardReducer:
    """One strategy's reduce-in-backward: hooks on its variables' replica copies, one reduction per
    backward per replica (see the module docstring)."""

    def __init__(self, group: ReplicaGroup, contexts: list, run: RunningSteps):
        self._group = group
        self._contexts = contexts    # each local replica's ReplicaContext (its collectives)
        self._run = run              # the running strategy.run's per-replica steps
        n = group.size
        self._leaves: list[dict[int, weakref.ref]] = [{} for _ in range(n)]   # index -> replica's leaf
        self._reached: list[dict[int, tuple]] = [{} for _ in range(n)]  # (leaf, its .grad, version) before
        self._set_aside: list[dict[int, torch.Tensor]] = [{} for _ in range(n)]  # earlier reduced grads
        self._queued = [False] * n
        self._variables: dict[int, weakref.ref] = {}   # index -> its variable
        # Per replica, leaves given a gradient not accumulated (autograd.grad) in this run -> the version of
        # that replica's copy then (an update after it changes it).
        self._computed: list[dict[int, int]] = [{} for _ in range(n)]
        self._count = 0
        self._buckets: dict[tuple, GradientBuckets] = {}
        # One replica per worker (MultiWorkerMirroredStrategy): buckets leave during backward.
        self._overlap: Any = None
        self._overlap_indices: list[int] = []
        self._overlap_members: frozenset[int] = frozenset()
        self._overlap_count = 0   # self._count when the overlap was built

    # --- hooks ------------------------------------------------------------------------------
    def track(self, var: Any) -> bool:
        """Hook ``var``'s replica copies (once it requires grad); True when hooked."""
        if not var._reduce_in_backward or not all(c.requires_grad for c in var._components):
            return False
        i = self._count
        self._count += 1
        self._variables[i] = weakref.ref(var)
        for r, leaf in enumerate(var._components):
            key = id(leaf)
            ref = self._leaves[r][i] = weakref.ref(leaf, lambda ref, key=key: _forget_copy(key, ref))
            _HOOKED_COPIES[key] = (ref, r, self._variables[i])
            leaf.register_hook(functools.partial(self._before_accumulate, r, i))
        return True

    def before_run(self) -> None:
        """Caller thread, replicas idle: forget what a backward that raised left noted (its end-of-backward
        callback never ran: a replica still marked queued would never reduce again); (re)build the
        overlapped all-reduce over every hooked leaf, if this strategy overlaps (one local replica,
        several workers) and variables were hooked."""
        if any(self._queued):
            self._forget_unfinished()
        if len(self._leaves) != 1 or self._count == self._overlap_count:
            return
        self._overlap_count = self._count
        live = {i: ref() for i, ref in self._leaves[0].items()}
        indices = sorted(i for i, leaf in live.items() if leaf is not None)
        if self._overlap is not None:
            self._overlap.close()
        self._overlap = self._group.overlap([live[i] for i in indices])
        self._overlap_indices = indices
        self._overlap_members = frozenset(indices)

    def _forget_unfinished(self) -> None:
        for r, set_aside in enumerate(self._set_aside):
            for i, old in set_aside.items():   # the reduced part a SUM set aside comes back
                leaf = self._leaves[r][i]()
                if leaf is not None:
                    leaf.grad = old if leaf.grad is None else old + leaf.grad
        for step in self._run.steps:   # (a backward that raised: its deferred end never ran)
            DEFERRED.pop(id(step), None)
        n = len(self._queued)
        self._queued = [False] * n
        self._reached = [{} for _ in range(n)]
        self._set_aside = [{} for _ in range(n)]

    def take_computed(self) -> list:
        """Caller thread, after a run: the variables some replica computed a gradient of without
        accumulating it (``torch.autograd.grad``: each replica's own, never reduced) and whose copies no
        in-place op changed since (an update through ``p.data``, or none); then forget them all."""
        computed, self._computed = self._computed, [{} for _ in self._computed]
        unchanged: dict[int, bool] = {}
        for r, versions in enumerate(computed):
            for i, version in versions.items():
                leaf = self._leaves[r][i]()
                unchanged[i] = unchanged.get(i, True) and leaf is not None and leaf._version == version
        return [v for v in (self._variables[i]() for i in sorted(unchanged) if unchanged[i]) if v is not None]

    @never_compiled   # (autograd's engine calls it in the replica thread: never_compiled)
    def _before_accumulate(self, r: int, i: int, grad: torch.Tensor) -> None:
        leaf = self._leaves[r][i]()
        if leaf is None:
            return
        here = current_replica_id()   # (None on autograd's device threads: CUDA backward)
        if here is not None and here != r:
            raise self._crossed(here, r, i)
        old = leaf.grad
        # A MEAN reduces the whole .grad: the mean of (reduced part, identical everywhere) + new part is
        # that part + mean(new), DDP's sum. A SUM sets the part an earlier backward reduced aside.
        if old is not None and self._run.steps[r].loss_reduction is ReduceOp.SUM:
            self._set_aside[r][i] = old
            leaf.grad = old = None
        self._reached[r][i] = (leaf, old, None if old is None else old._version)
        self._queue(r, here)

    def _crossed(self, here: int, r: int, i: int) -> RuntimeError:
        """A replica's backward reached another replica's copy: its loss used that replica's tensor."""
        var = self._variables[i]()
        return crossed_error(here, r, repr(var.name) if var is not None else "a variable")

    def _queue(self, r: int, here: int | None) -> None:
        if not self._queued[r]:
            self._queued[r] = True
            finish = functools.partial(_outside_replica_mode, self._finish, r)
            key = id(self._run.steps[r]) if here is None and self._run.active else None
            if key in IN_BACKWARD:   # autograd's device thread, in replica r's CUDA loss.backward() (DEFERRED)
                DEFERRED[key] = finish
            else:
                _queue_callback(finish)

    # --- end of backward --------------------------------------------------------------------------
    @never_compiled   # (autograd's engine calls it in the replica thread: never_compiled)
    def _finish(self, r: int) -> None:
        """Autograd's last act of a backward in replica ``r``: reduce what it accumulated."""
        self._queued[r] = False
        reached, set_aside = self._reached[r], self._set_aside[r]
        self._reached[r], self._set_aside[r] = {}, {}
        fired = {i: leaf for i, (leaf, before, version) in reached.items() if _accumulated(leaf, before, version)}
        if len(fired) < len(reached) and self._run.active:
            computed = self._computed[r]
            for i, (leaf, _, _) in reached.items():
                if i not in fired:
                    computed.setdefault(i, leaf._version)
        for i, old in set_aside.items():
            if i not in fired:   # a gradient was computed (autograd.grad), not accumulated: put it back
                leaf = self._leaves[r][i]()
                if leaf is not None:
                    leaf.grad = old
        if not fired or not self._run.active:
            return
        step: ReplicaStep = self._run.steps[r]
        op = step.loss_reduction
        ctx = self._contexts[r]
        if self._overlap is not None:
            indices, leaves = self._finish_overlap(ctx, op)
            late = [i for i in sorted(fired) if i not in self._overlap_members]
            if late:   # hooked since the overlap was built: unfrozen in this run (requires_grad_(True))
                self._reduce_in_buckets(ctx, late, [fired[i] for i in late], op)
                indices, leaves = indices + late, leaves + [fired[i] for i in late]
        elif self._group.cooperative_reduce:
            indices, leaves = self._reduce_in_place(r, fired, op)
        else:
            sets = self._group.share(r, ("loss.backward", op.name), frozenset(fired))
            reached = frozenset().union(*sets)
            if ctx.num_replicas_in_sync > len(self._leaves):   # other workers' replicas: their leaves too
                reached = self._reached_by_any_worker(ctx, reached)
            indices = sorted(reached)
            leaves = [fired[i] if i in fired else self._leaves[r][i]() for i in indices]
            self._reduce_in_buckets(ctx, indices, leaves, op)
        for i, leaf in zip(indices, leaves):
            old = set_aside.get(i)
            if old is not None:
                leaf.grad = old + leaf.grad if leaf.grad is not None else old
        step.gradients = SummedGrads

    def _reached_by_any_worker(self, ctx: Any, reached: frozenset) -> frozenset:
        """The leaves some replica of any worker reached (a head only one worker's batches use, DDP's unused
        parameter): one flag per hooked leaf, summed over every replica, so every worker reduces the same
        buckets (each worker's own union made them differ: a collective mismatch)."""
        flags = torch.zeros(self._count, dtype=torch.float32)
        flags[sorted(reached)] = 1.0
        return frozenset(torch.nonzero(ctx._all_reduce_owned(ReduceOp.SUM, flags)).flatten().tolist())

    def _finish_overlap(self, ctx: Any, op: ReduceOp) -> tuple[list[int], list]:
        """Wait for the buckets launched during backward (and launch the rest); the leaves any worker
        reached get the reduced gradients."""
        total = ctx.num_replicas_in_sync
        indices, leaves = [], []
        sparse_dims = {i: _sparse_dim(self._leaves[0][i]()) for i in self._overlap_indices}
        with torch.no_grad():
            for i, g in zip(self._overlap_indices, self._overlap.finish()):
                leaf = self._leaves[0][i]()
                if g is None or leaf is None:
                    continue
                if op is ReduceOp.MEAN:
                    algorithms.divide_(g, total)
                leaf.grad = g.to_sparse(sparse_dims[i]) if sparse_dims[i] else g
                indices.append(i)
                leaves.append(leaf)
        return indices, leaves

    def _reduce_in_place(self, r: int, fired: dict, op: ReduceOp) -> tuple[list[int], list]:
        """Replicas sharing one CPU: one meeting hands out every replica's gradients of the leaves it
        reached; each replica then reduces its share of every gradient into every replica's, and a
        second meeting waits until all shares are written."""
        n = len(self._leaves)
        group = self._group
        mine = {i: _own_contiguous(leaf) for i, leaf in fired.items()}
        everyone = group.share(r, ("loss.backward", op.name), mine)
        indices = sorted(frozenset().union(*everyone))   # the same list on every replica
        if any(len(grads) != len(indices) for grads in everyone):
            # A leaf another replica reached and this one did not counts as this replica's current
            # .grad, or zeros (as DDP counts an unused parameter): each replica fills in its own, then
            # all meet again before anyone reads them. A new dict: the others still read the shared one
            # (a replica that reached every leaf, seeing it filled, skipped this second meeting).
            mine = dict(mine)
            for i in indices:
                if i not in mine:
                    mine[i] = self._unreached(r, i, next(g[i] for g in everyone if i in g))
            everyone = group.share(r, ("loss.backward.unused", op.name), mine)
        sparse: dict[int, torch.Tensor] = {}
        try:
            with torch.no_grad():
                for i in indices:
                    if any(grads[i].is_sparse for grads in everyone):
                        sparse[i] = _sum_sparse([grads[i] for grads in everyone], op)
                        continue
                    flat = [grads[i].view(-1) for grads in everyone]
                    numel = flat[0].numel()
                    if numel >= _SLICE_MIN_NUMEL:
                        part = algorithms.replica_slice(numel, r, n)
                    else:
                        part = slice(0, numel) if i % n == r else slice(0, 0)
                    if part.start < part.stop:
                        algorithms.reduce_slice(flat, flat, part, op)
        finally:   # nobody reads a gradient before every share is written
            group.barrier(r, "loss.backward.done")
        leaves = [self._leaves[r][i]() for i in indices]
        for i, leaf in zip(indices, leaves):
            if i in sparse:
                leaf.grad = sparse[i]
        return indices, leaves

    def _unreached(self, r: int, i: int, like: torch.Tensor) -> torch.Tensor:
        """Replica ``r``'s gradient of leaf ``i`` that its backward did not reach: what ``.grad`` holds
        (an earlier backward's), dense and contiguous, or new zeros set as its ``.grad``."""
        leaf = self._leaves[r][i]()
        g = _own_contiguous(leaf)
        if g is None:
            g = leaf.grad = torch.zeros_like(like, device=leaf.device)
        return g

    def _reduce_in_buckets(self, ctx: Any, indices: list[int], leaves: list, op: ReduceOp) -> None:
        buckets = self._buckets.get(tuple(indices))
        if buckets is None:
            buckets = self._buckets.setdefault(tuple(indices), GradientBuckets(self._group.bucket_bytes))
        sparse_dims = [_sparse_dim(leaf) for leaf in leaves]
        # every index is a leaf some replica reached (its fired set, or the union the replicas shared)
        reduced = buckets.all_reduce(ctx, leaves, [leaf.grad for leaf in leaves], ReduceOp.SUM, all_present=True)
        total = ctx.num_replicas_in_sync
        with torch.no_grad():
            for leaf, g, sparse_dim in zip(leaves, reduced, sparse_dims):
                if g is not None and op is ReduceOp.MEAN:
                    algorithms.divide_(g, total)
                leaf.grad = g.to_sparse(sparse_dim) if g is not None and sparse_dim else g


def _accumulated(leaf: torch.Tensor, before: torch.Tensor | None, version: int | None) -> bool:
    """Whether this backward accumulated into ``leaf.grad`` (it was ``before``, at ``version``)."""
    g = leaf.grad
    return g is not None and (g is not before or g._version != version)


def _own_contiguous(leaf: torch.Tensor) -> torch.Tensor | None:
    """``leaf.grad``, made contiguous (a dense one is written in place); a sparse one stays sparse."""
    g = leaf.grad
    if g is not None and not g.is_sparse and not g.is_contiguous():
        g = leaf.grad = g.contiguous()
    return g


def _sparse_dim(leaf: Any) -> int:
    """The sparse dimensions of ``leaf``'s gradient (0: dense, or none)."""
    g = None if leaf is None else leaf.grad
    return g.sparse_dim() if g is not None and g.is_sparse else 0


def _sum_sparse(grads: list, op: ReduceOp) -> torch.Tensor:
    """Every replica's gradient of a leaf, one of them sparse (``nn.Embedding(sparse=True)``), reduced as
    Gloo's sparse all-reduce does for DDP: the rows any replica touched, summed in replica order (each
    replica computes the same tensor), divided for a MEAN. Nothing is written in place: the other
    replicas still read these tensors."""
    total = grads[0]
    for g in grads[1:]:
        total = total + g
    return total / len(grads) if op is ReduceOp.MEAN else total
