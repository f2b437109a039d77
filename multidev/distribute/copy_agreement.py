"""After ``strategy.run``: copies written in the replicas outside the update paths must agree on
every worker, not only within one process.

A program that updates weights by hand from an unreduced gradient (``torch.autograd.grad`` then
``p -= lr * g``, or ``p.data.sub_(g)``) trains each replica on its own data. Within a process the
copies are compared (``DistributedVariable._check_replica_writes``); with several workers each
worker's copies are compared with every other's: each worker hashes its local copies of the
written variables (16 bytes each) and the workers all-gather the digests, so every worker reaches
the same verdict and raises the same error (global replica ids), and no weights travel. With one
replica per worker this is the only check: one copy per process cannot drift locally.

The exchange happens only in runs that wrote some variable outside the update paths; programs run
the same code on every worker, so every worker makes it (a worker that wrote where another did not
fails the collective's fingerprint check at once, naming both calls).
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev.distribute.worker_collective import WorkerCollective

_DIGEST_BYTES = 16


def check_across_workers(workers: WorkerCollective, written: Sequence, computed: Sequence) -> None:
    """Raise the variable's drift error if some worker's copy of a variable in ``written`` (replica 0's
    copy's version changed) or ``computed`` (an unreduced gradient, maybe applied through ``.data``)
    differs from global replica 0's; mark the agreeing ones synced. ``workers``: several."""
    candidates = [v for v in written if v._copies_must_agree()] + [v for v in computed if v._copies_must_agree()]
    for var in written:
        if not var._copies_must_agree():
            var._check_replica_writes()   # nothing to compare (e.g. sync-on-read): marks it synced
    candidates = list({id(v): v for v in candidates}.values())
    if not candidates:
        return
    local = torch.stack([digests(v) for v in candidates])   # (variables, local replicas, digest)
    everyone = workers.gather(local, axis=1)                    # (variables, all replicas, digest)
    differ = (everyone != everyone[:, :1]).any(dim=2)
    for var, row in zip(candidates, differ):
        replicas = row.nonzero().flatten().tolist()
        if replicas:
            raise var._drifted(replicas[0])
    for var in candidates:
        var._mark_synced()


def digests(var) -> torch.Tensor:
    """One digest of each local copy's bytes (exact: a single changed bit changes it)."""
    rows = []
    with torch.no_grad(), DisableTorchFunctionSubclass():
        for copy in var._components:
            hashed = hashlib.blake2b(digest_size=_DIGEST_BYTES)
            for part in stored_parts(copy.detach()):
                hashed.update(part.contiguous().reshape(-1).view(torch.uint8).cpu().numpy())
            digest = hashed.digest()
            rows.append(torch.frombuffer(bytearray(digest), dtype=torch.uint8))
    return torch.stack(rows)


def stored_parts(copy: torch.Tensor) -> tuple:
    """The tensors that hold ``copy``: itself, or a sparse buffer's (a GCN's adjacency) indices and values."""
    if copy.layout == torch.sparse_coo:
        copy = copy.coalesce()
        return copy.indices(), copy.values()
    return (copy,) if copy.layout == torch.strided else (copy.to_dense(),)


def shared_copy_refusal(variables: Sequence, local_replicas: int, error: RuntimeError) -> ValueError | None:
    """A replica's backward failed on torch's "modified by an inplace operation" in a run that wrote a
    variable's one shared copy in place (CentralStorageStrategy: SAM's ``p.add_(e_w)`` in one replica while
    another still differentiated through the copy): the refusal the run's end gives when the threads' order
    lets every replica finish (``DistributedVariable._check_replica_writes``), instead of the race's symptom."""
    if local_replicas < 2 or "modified by an inplace operation" not in str(error):
        return None
    for var in variables:
        if var._shared_copy_written():
            var._data_set_in_run = False
            return var._written_by_every_replica()
    return None
