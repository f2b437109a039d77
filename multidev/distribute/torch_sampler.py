"""A torch ``DataLoader`` whose sampler already shards the data by process (``DistributedSampler``,
the input of PyTorch's DDP tutorials) given to a strategy's input functions.

Under DDP each process's loader yields that process's share of the global batch. Splitting such a
batch as a global batch (every worker keeping its slice of its own batch) would train each worker
on ``1 / num_workers`` of its share, silently. So a loader whose sampler has the job's workers
(``num_replicas == num_workers``, ``rank == worker_index``) is read as DDP reads it: each batch is
this worker's share, split across its local replicas only (``distribute_datasets_from_function``'s
rule). A sampler of any other layout raises ``ValueError`` naming the sampler and both fixes.
``set_epoch`` works as under DDP: every pass over the distributed dataset iterates the loader
afresh, which asks the sampler for the current epoch's order.
"""

from __future__ import annotations

from typing import Any

import torch.utils.data as tud

from multidev.data import graph
from multidev.data.dataset import Dataset
from multidev.data.torch_source import TorchDataset


def _is_distributed(sampler: Any) -> bool:
    """torch's ``DistributedSampler`` (or a subclass), or a sampler built like it (``num_replicas`` and
    ``rank`` integers, as timm's and other libraries' distributed samplers have)."""
    if isinstance(sampler, tud.DistributedSampler):
        return True
    return all(isinstance(getattr(sampler, a, None), int) for a in ("num_replicas", "rank"))


def distributed_sampler(loader: tud.DataLoader) -> Any | None:
    """The loader's distributed sampler (given as ``sampler=`` or inside its ``batch_sampler``), or None."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    for candidate in (getattr(loader, "sampler", None), batch_sampler, getattr(batch_sampler, "sampler", None)):
        if candidate is not None and _is_distributed(candidate):
            return candidate
    return None


def samplers_of(dataset: Any) -> list:
    """The distributed samplers of the DataLoaders that ``dataset`` reads (itself, or nodes of its graph)."""
    if isinstance(dataset, tud.DataLoader):
        loaders = [dataset]
    elif isinstance(dataset, Dataset):
        loaders = [n._data for n in graph.nodes(dataset) if isinstance(n, TorchDataset) and isinstance(n._data, tud.DataLoader)]
    else:
        return []
    return [s for s in map(distributed_sampler, loaders) if s is not None]


def equal_on_every_worker(dataset: Any) -> bool:
    """Whether ``dataset`` is a DataLoader read as is (``from_torch``, no transformation after it) whose
    sampler is torch's ``DistributedSampler``: it gives every rank ``num_samples`` examples (padded or
    dropped to that), so every worker's loader yields as many batches and the workers need not agree
    on each step (they may fetch ahead). A subclass that overrides ``__iter__`` or ``__len__`` (an
    evaluation sampler that does not pad: DDP's ``join()`` case) may give the workers uneven counts."""
    if not (isinstance(dataset, TorchDataset) and isinstance(dataset._data, tud.DataLoader)):
        return False
    sampler = distributed_sampler(dataset._data)
    return (isinstance(sampler, tud.DistributedSampler) and type(sampler).__iter__ is tud.DistributedSampler.__iter__
            and type(sampler).__len__ is tud.DistributedSampler.__len__)


_WORKERS = ("worker process(es)", "worker", "strategy.extended.num_workers and strategy.extended.worker_index; under "
            "`multidev launch` also WORLD_SIZE and RANK")
PIPELINES = ("input pipeline(s)", "pipeline", "input_context.num_input_pipelines and input_context.input_pipeline_id")


def reads_worker_share(dataset: Any, num_workers: int, worker_index: int, what: str, names: tuple = _WORKERS) -> bool:
    """True when ``dataset``'s batches are this worker's share of each global batch (a loader whose
    distributed sampler has the job's ``num_workers`` replicas and this worker's rank); False when
    it reads no distributed sampler.

    Raises:
        ValueError: a distributed sampler of another layout (the strategy would shard its batches a
            second time, or the job would train on part of the data).
    """
    samplers = samplers_of(dataset)
    for sampler in samplers:
        if (sampler.num_replicas, sampler.rank) != (num_workers, worker_index):
            raise ValueError(_mismatch(sampler, num_workers, worker_index, what, names))
    return bool(samplers)


def _mismatch(sampler: Any, num_workers: int, worker_index: int, what: str, names: tuple) -> str:
    name, (many, one, where) = type(sampler).__name__, names
    return (
        f"{what} got a torch DataLoader whose sampler {name}(num_replicas={sampler.num_replicas!r}, "
        f"rank={sampler.rank!r}) gives it 1/{sampler.num_replicas} of the data, but this job has "
        f"{num_workers!r} {many} and this is {one} {worker_index!r}: its batches would be sharded again or cover "
        f"part of the data. Either give the sampler the job's layout, {name}(dataset, num_replicas={num_workers}, "
        f"rank={worker_index}) ({where}): each loader batch is then this {one}'s share of the global batch, as "
        "under DDP; or drop the sampler and give every worker the same global batches, DataLoader(dataset, "
        "batch_size=GLOBAL_BATCH_SIZE, shuffle=True, generator=torch.Generator().manual_seed(SEED)): the "
        "strategy splits each across all replicas."
    )


def check_loader_feeds_every_replica(loader: Any, replicas: int) -> None:
    """Refuse a torch DataLoader whose batches are smaller than the replicas they are split across.

    The loader's batch is the global batch (TensorFlow's rule): ``DataLoader(batch_size=1)`` on 2
    replicas gives replica 1 an empty batch at every step (its mean loss nan, its gradient zero, the
    average of the two halved), where each DDP rank reading the same loader through a
    ``DistributedSampler`` trains its own example. A short last batch is fine (split as TF splits it).

    Raises:
        ValueError: ``loader.batch_size`` below ``replicas``.
    """
    size = getattr(loader, "batch_size", None) if isinstance(loader, tud.DataLoader) else None
    if size is None or size >= replicas:
        return
    raise ValueError(
        f"experimental_distribute_dataset got a torch DataLoader with batch_size={size!r} for {replicas} replicas: "
        f"its batch is the global batch, split across the replicas, so {replicas - size} of them would train on an "
        "empty batch at every step (a nan loss, a zero gradient averaged in), where each DDP rank with a "
        "DistributedSampler trains its own batch. Either give each replica its own batch of that size, "
        f"strategy.distribute_datasets_from_function(lambda ctx: DataLoader(dataset, batch_size={size}, "
        "sampler=DistributedSampler(dataset, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id))) "
        "(each replica its own batch, as each DDP rank; examples of different lengths need no padding), or batch "
        f"the global batch, DataLoader(dataset, batch_size={size} * strategy.num_replicas_in_sync).")


def loader_batch_sizes(loader: Any) -> list[int] | None:
    """How many examples each batch of ``loader`` holds, where torch's own batching decides it (a map-style
    dataset, torch's ``BatchSampler`` over a sampler with a length); None otherwise."""
    if not isinstance(loader, tud.DataLoader) or loader.batch_size is None:
        return None
    if isinstance(loader.dataset, tud.IterableDataset) or type(loader.batch_sampler) is not tud.BatchSampler:
        return None
    try:
        total = len(loader.batch_sampler.sampler)
    except TypeError:
        return None
    full, rest = divmod(total, loader.batch_size)
    return [loader.batch_size] * full + ([rest] if rest and not loader.drop_last else [])


def check_examples_along_dim0(index: int, examples: int, rows: int, leaf: Any) -> None:
    """Refuse a loader batch of ``examples`` examples whose tensors have ``rows`` rows along dimension 0.

    Raises:
        ValueError: the batch is not batch-first (a sequence-first ``collate_fn``: ``pad_sequence``'s
            default, ``nn.Transformer``'s ``(S, N)`` layout), whose split would cut every sequence.
    """
    if rows == examples:
        return
    shape = tuple(getattr(leaf, "shape", ()))
    raise ValueError(
        f"experimental_distribute_dataset: batch {index} of the torch DataLoader holds {examples} examples, but its "
        f"tensors have {rows} rows along dimension 0 (a tensor of shape {shape}). The strategy splits dimension 0 "
        "of every tensor across the replicas (TensorFlow's rule), so it would cut the sequences instead of the "
        "examples. A sequence-first collate_fn (pad_sequence's default, nn.Transformer's (S, N) layout) must give "
        "the strategy batch-first tensors: pad_sequence(..., batch_first=True) (or batch.t()) in collate_fn, and "
        "src = src.t() (src.transpose(0, 1)) at the start of the step.")


def sampled_batch_minimum(loader: Any, replicas: int) -> int:
    """The fewest examples a batch of ``loader`` must hold: ``replicas`` where a ``batch_sampler=`` of the
    program's decides its batches (their sizes vary and are unknown ahead: a length-bucketing sampler's
    remainders), else 0 (no check: torch's ``BatchSampler`` is checked ahead, its short last batch split
    as TensorFlow splits it)."""
    if not isinstance(loader, tud.DataLoader) or loader.batch_size is not None or replicas < 2:
        return 0
    return 0 if loader.batch_sampler is None or type(loader.batch_sampler) is tud.BatchSampler else replicas


def check_sampled_batch(index: int, examples: int, fewest: int) -> None:
    """Refuse a batch sampler's batch of fewer examples than the replicas it is split across.

    Raises:
        ValueError: a replica would train on an empty batch (a nan loss, a zero gradient averaged in).
    """
    if examples >= fewest:
        return
    raise ValueError(
        f"experimental_distribute_dataset: batch {index} of the torch DataLoader's batch_sampler holds {examples} "
        f"example(s), split across {fewest} replicas: {fewest - examples} of them would train on an empty batch (a "
        "nan loss, a zero gradient averaged in), where each DDP rank reading its own batches trains its own. Give "
        "each replica its own batches, strategy.distribute_datasets_from_function(lambda ctx: DataLoader(dataset, "
        "batch_sampler=YourBatchSampler(..., num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id), "
        "collate_fn=...), md.distribute.InputOptions(experimental_replication_mode="
        "md.distribute.InputReplicationMode.PER_REPLICA)), or make every batch hold at least "
        f"{fewest} examples.")
