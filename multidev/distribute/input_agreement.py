"""Workers that each keep their slice of every global batch must read the same global batches.

``experimental_distribute_dataset`` on several workers shards a torch DataLoader by data (TensorFlow's
``AutoShardPolicy.DATA``, its AUTO fallback without files): every worker reads the whole loader and keeps
its replicas' slices of each batch, so each batch must be the same on every worker. A loader that gives
each worker its own share instead (an ``IterableDataset`` splitting by ``RANK`` / ``WORLD_SIZE`` as
WebDataset's ``split_by_node`` does, which ``multidev launch`` sets; a shuffle seeded differently per
worker) then trained each worker on its slice of its own batch: half the data on 2 workers, silently
(``tests/programs/loader_programs.py``: ``iterable_split_by_env``). The workers compare a fingerprint of
each pass's first batch (one small gather per pass, on the caller's thread) and raise before any step.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from multidev.data import graph
from multidev.data.dataset import Dataset
from multidev.data.torch_source import TorchDataset
from multidev.values.distributed import flatten

_BYTES_PER_LEAF = 1 << 20   # enough to tell batches apart; bounded cost on large images


def reads_torch(dataset: Dataset) -> bool:
    """Whether ``dataset`` reads a torch Dataset or DataLoader (whose order and sharding multidev cannot see)."""
    return any(isinstance(n, TorchDataset) for n in graph.nodes(dataset))


def _leaf_bytes(leaf: Any) -> bytes:
    if not isinstance(leaf, torch.Tensor):
        return repr(leaf).encode()
    flat = leaf.detach().reshape(-1)
    flat = flat[:max(1, _BYTES_PER_LEAF // max(1, flat.element_size()))].cpu().contiguous()
    head = f"{tuple(leaf.shape)}{leaf.dtype}".encode()
    return head + (flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")


def batch_print(element: Any) -> int:
    """A 56-bit fingerprint of a global batch (shapes, dtypes, the first MiB of each tensor's bytes)."""
    digest = hashlib.blake2b(digest_size=7)
    for leaf in flatten(element):
        digest.update(_leaf_bytes(leaf))
    return int.from_bytes(digest.digest(), "little")


def check_same_first_batch(collective: Any, fingerprint: int | None) -> None:
    """Raise on every worker unless all workers' first batches (None: no batch) are the same.

    Raises:
        ValueError: the workers' loaders yield different first batches, or some yield none.
    """
    row = torch.tensor([[0 if fingerprint is None else 1, fingerprint or 0]], dtype=torch.int64)
    rows = collective.gather(row, axis=0).tolist()
    if all(r == rows[0] for r in rows):
        return
    differing = [i for i, r in enumerate(rows) if r != rows[0]]
    raise ValueError(
        f"experimental_distribute_dataset: the torch DataLoader's first batch on worker(s) {differing} differs "
        f"from worker 0's (of {len(rows)} workers). On several workers each batch of the loader is the global "
        "batch, read by every worker, which keeps its replicas' slice of it (AutoShardPolicy.DATA); a loader that "
        "gives each worker its own share (an IterableDataset splitting by RANK/WORLD_SIZE or "
        "torch.distributed.get_rank(), WebDataset's split_by_node; a shuffle seeded differently per worker) would "
        "train each worker on part of its share. For DDP's input, each worker reading its own share, write "
        "strategy.distribute_datasets_from_function(lambda ctx: DataLoader(<the data of pipeline "
        "ctx.input_pipeline_id of ctx.num_input_pipelines>, batch_size=PER_REPLICA_BATCH)) (a DistributedSampler "
        "with num_replicas=strategy.extended.num_workers, rank=strategy.extended.worker_index is read that way "
        "too); else make every worker's loader yield the same batches (seed its shuffle: "
        "generator=torch.Generator().manual_seed(SEED)).")
