"""After a step function's first run: every replica's copy of each weight and module buffer must agree.

Generative models write state from the batch in ``forward``, through ``.data`` (which torch's version
counter does not see, so ``_check_replica_writes`` does not either): Glow's ``ActNorm`` initialises
``loc``/``scale`` from the first batch it sees (``self.loc.data.copy_(-mean)``); rosinality's VQ-VAE moves
its EMA codebook buffers (``self.embed.data.copy_(...)``) after ``dist_fn.all_reduce`` of the batch's
statistics, a helper that does nothing without a process group (multidev starts none). On replicas each
copy then holds its own slice's numbers: a buffer read by the next forward (the codebook) trains silently
off DDP's result (each DDP rank's forward starts from rank 0's buffers, ``broadcast_buffers=True``, or the
all-reduced ones); weights initialised apart were overwritten by the owner replica's update (0.18 off).

So after the first successful run of each step function (``_FirstRuns``, as the other first-run checks)
the copies of every variable whose copies must agree and of every module buffer, but a norm layer's running
statistics (each replica's own slice's by design: they do not change the training forward), are compared:
locally with ``torch.equal``, across workers by digests (``copy_agreement``). A difference raises
``ValueError`` saying why and what to write. ``optimizer.step()`` compares the weights' copies before its
update in the first runs too (``reduced_grads``): the update would otherwise make them equal again.
Later runs are not compared (a write that first differs after the first run is not seen).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev.distribute import copy_agreement
from multidev.distribute.replica_run import _FirstRuns
from multidev.values.variables import SyncOnReadVariable


#: Variables already refused (by id, held weakly): a program that caught the error keeps its model alive in
#: the process (a notebook), and the first run of its next, unrelated step function must not be refused again.
_REFUSED: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


class FirstRunAgreement:
    """The step functions already compared (one per strategy's extended)."""

    def __init__(self) -> None:
        self._seen = _FirstRuns()

    def check(self, fn: Callable, variables: Sequence, workers: Any, every_worker: bool) -> None:
        """After ``fn``'s first successful run: raise if some copy of a variable or buffer differs. Across
        workers only when the run made a collective (``every_worker``): a run on the chief alone
        (``if worker_index == 0: strategy.run(...)``) must not wait for the others."""
        if self._seen.seen(fn):
            return
        self._seen.add(fn)
        candidates = [v for v in variables if _must_agree(v)]
        if workers.num_workers > 1 and every_worker:
            _across_workers(candidates, workers)
            return
        apart = [(var, r) for var in candidates for r in local_differences(var)[:1]]
        if apart:
            raise refused(apart)


def local_differences(var: Any) -> list[int]:
    """The local replicas whose copy of ``var`` differs from replica 0's."""
    with torch.no_grad(), DisableTorchFunctionSubclass():
        first = var._components[0]
        return [r for r, c in enumerate(var._components[1:], 1)
                if c is not first and not same(c.to(first.device), first)]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal copies, NaN where the other has NaN (weights a NaN loss left, as TerminateOnNaN keeps them)."""
    if a.layout != torch.strided or b.layout != torch.strided:   # a sparse buffer (a GCN's adjacency)
        return a.layout == b.layout and a.shape == b.shape and all(
            same(x, y) for x, y in zip(copy_agreement.stored_parts(a), copy_agreement.stored_parts(b)))
    if torch.equal(a, b):
        return True
    if not a.is_floating_point() or a.shape != b.shape:
        return False
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def refused(apart: list, before_update: str = "") -> ValueError:
    """The error for the first of ``apart`` (``(variable, replica)`` pairs whose copies differ); every one of
    them is noted as refused."""
    for var, _ in apart:
        _REFUSED[id(var)] = var
    return copies_differ(*apart[0], before_update)


def _must_agree(var: Any) -> bool:
    if var._share_storage or var._own_updates or _REFUSED.get(id(var)) is var:
        return False
    if isinstance(var, SyncOnReadVariable):   # a torch module's buffer (not a Keras state weight's policy)
        return var._module_value and not var._running_statistic
    return var._copies_must_agree()


def _across_workers(candidates: list, workers: Any) -> None:
    """Every worker's copies by digest. Workers whose live variables differ in number (a collection at
    another moment) are not compared: the digests would not line up."""
    counts = workers.gather(torch.tensor([len(candidates)]), axis=0)
    if not candidates or bool((counts != counts[0]).any()):
        return
    local = torch.stack([copy_agreement.digests(v) for v in candidates])   # (variables, local replicas, digest)
    everyone = workers.gather(local, axis=1)
    differ = (everyone != everyone[:, :1]).any(dim=2)
    apart = [(var, row.nonzero().flatten().tolist()[0]) for var, row in zip(candidates, differ) if bool(row.any())]
    if apart:
        raise refused(apart)


def copies_differ(var: Any, replica: int, before_update: str = "") -> ValueError:
    """The error for a variable or buffer whose replica ``replica``'s copy (global id) differs from replica 0's."""
    if isinstance(var, SyncOnReadVariable):
        return ValueError(
            f"Buffer {var._tf_name!r}: replica {replica}'s copy differs from replica 0's after the step function's "
            "first strategy.run. Each replica wrote it from its own slice of the batch (an EMA codebook's "
            "`self.embed.data.copy_(...)`, a running statistic read by the next forward), so later steps would "
            "train silently on other numbers than DDP's: each DDP rank's forward starts from rank 0's buffers "
            "(broadcast_buffers=True), and a program that sums the statistics with torch.distributed "
            "(`dist.all_reduce(embed_sum)`) gives every rank the global batch's. A helper that skips its "
            "all_reduce when `dist.is_initialized()` is False or the world size is 1 (rosinality's "
            "`dist_fn.all_reduce`) does nothing here: multidev starts no process group. Sum the statistics "
            "across replicas before the update, `t.copy_(md.distribute.get_replica_context().all_reduce('sum', t))` "
            "(every copy then holds the global batch's, as DDP's with its all-reduce); for DDP's rank 0 "
            "statistics without one, `t.copy_(ctx.all_gather(t[None], axis=0)[0])`. (BatchNorm's and "
            "InstanceNorm's running statistics may differ: they do not change the training forward.) "
            "See docs/ddp_port.md, 'Generative models'.")
    when = before_update or "after the step function's first strategy.run"
    return ValueError(
        f"Variable {var._tf_name!r}: replica {replica}'s copy differs from replica 0's {when}, written inside the step outside an "
        "optimizer step, each replica from its own values (a data-dependent initialisation from the replica's "
        "slice of the batch, as Glow's ActNorm `self.loc.data.copy_(-mean)` in its first forward). Under DDP each "
        "rank would keep its own weights and the ranks would drift apart; the replicas hold one set of weights. "
        "Run the initialising forward once before training, outside strategy.run, on the first global batch "
        "(`with torch.no_grad(): model(first_batch)`: every copy gets that batch's initialisation, as DDP's ranks "
        "do when each runs it on the same batch), or reduce the statistics first "
        "(`md.distribute.get_replica_context().all_reduce('mean', mean)`). An outer update written by hand from "
        "the replica's own tasks (Reptile's `p.data.add_(...)`): set `p.grad = ...` instead and call the "
        "optimizer's `step()`, which sums gradients no backward reduced across replicas (DDP's with "
        "`dist.all_reduce(p.grad)`). See docs/ddp_port.md, 'Generative models' and 'Reinforcement and "
        "meta-learning'.")
