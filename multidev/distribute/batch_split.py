"""How one global batch is cut into per-replica batches, as TensorFlow's rebatching cuts it
(full batches evenly, partial batches spread; with auto-sharding off, rows re-cut in order)."""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import torch

from multidev.data.combine import ZippedDict, ZippedTuple
from multidev.data.options import AutoShardPolicy
from multidev.distribute.example_lists import example_count, split_examples
from multidev.values.distributed import flatten, map_structure

_FILLING_POLICIES = (AutoShardPolicy.OFF, AutoShardPolicy.FILE, AutoShardPolicy.HINT)


def replica_batch_sizes(global_batch_size: int, num_replicas: int) -> list[int]:
    """How many examples each replica gets from a full global batch."""
    base, extra = divmod(global_batch_size, num_replicas)
    return [base + (1 if r < extra else 0) for r in range(num_replicas)]


def leading_size(element: Any) -> int:
    """The rows of one global batch: its tensors' common dimension 0 (a zip of parts batched to
    different sizes: its largest part's, ``zipped_parts``)."""
    parts = zipped_parts(element)
    if parts is not None:
        return max(leading_size(p) for p in parts)
    examples = example_count(element)   # torchvision's detection batches: tuples of images and of targets
    if examples is not None:
        return examples
    sizes = set()
    for leaf in flatten(element):
        if isinstance(leaf, torch.Tensor):
            if leaf.dim() == 0:
                raise ValueError(_scalar_message(element))
            sizes.add(leaf.shape[0])
        elif hasattr(leaf, "__len__"):
            sizes.add(len(leaf))
    if len(sizes) != 1:
        raise ValueError(
            f"Components of a dataset element have different batch sizes {sorted(sizes)} (their dimension 0); "
            "cannot split it. multidev splits every tensor of a global batch along dimension 0, as TensorFlow does: "
            "make sequence-first data batch-first (e.g. x.transpose(0, 1), batch_first=True) and flatten targets "
            "after the split, inside the step. An element of md.data.Dataset.zip of datasets batched to different "
            "sizes is cut part by part, as TensorFlow cuts it, but only as the zip yields it: a map or a torch "
            "DataLoader that rebuilds it (or Keras 3's fit) cannot be told from sequence-first tensors. Map each "
            "dataset before zipping them, batch each replica's parts with "
            "strategy.distribute_datasets_from_function, or batch the zipped datasets to one size. A collate_fn's "
            "sampled subgraph (node features, edge_index) or nn.EmbeddingBag's flat ids with offsets is no batch to "
            "cut: give each replica its own loader, as each DDP rank has, with "
            "strategy.distribute_datasets_from_function(lambda ctx: DataLoader(..., sampler=DistributedSampler(data, "
            "ctx.num_input_pipelines, ctx.input_pipeline_id), collate_fn=...), md.distribute.InputOptions("
            "experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)), or build the offsets "
            "in the step from padded ids and lengths.")
    return sizes.pop()


def _scalar_message(element: Any) -> str:
    batched = [leaf for leaf in flatten(element) if not isinstance(leaf, torch.Tensor) or leaf.dim() > 0]
    if not batched:
        return ("Cannot distribute a dataset of scalars across replicas: each element must be a batch. "
                "Call dataset.batch(global_batch_size) before distributing it.")
    return ("Cannot split a global batch with a scalar component across replicas: every component is cut along "
            "its dimension 0, and a scalar (e.g. the index of Dataset.enumerate() applied after batch()) has none. "
            "Call enumerate() before batch() (its indices are then batched too), or drop the scalar in a map.")


def partial_batch_sizes(batch_size: int, num_replicas: int) -> list[int]:
    """How many examples each replica gets from a partial (last) global batch, as TensorFlow splits it.

    TensorFlow's rebatching cuts a short batch into consecutive slices of ``ceil(B / n)`` rows, so
    the examples are spread over the replicas instead of filling the first ones: 4 over 2 replicas
    gives ``[2, 2]``, 5 gives ``[3, 2]``, 4 over 3 gives ``[2, 2, 0]``.
    """
    per = -(-batch_size // num_replicas)
    return [max(0, min(per, batch_size - r * per)) for r in range(num_replicas)]


def split_sizes(size: int, num_replicas: int, static_batch_size: int, num_workers: int) -> list[int]:
    """Rows per replica for one global batch of ``size`` rows (``static_batch_size``: the dataset's batch
    size, <= 0 when unknown). On one worker TF 2.21 cuts every batch in consecutive slices of ``ceil(B / n)``
    rows (``partial_batch_sizes``; observed on 3 replicas: 16 rows as [6, 6, 4]); on several workers a full
    batch in sizes that differ by at most one (``replica_batch_sizes``), a partial one in ``ceil`` slices."""
    if num_workers == 1 or 0 < size < static_batch_size:
        return partial_batch_sizes(size, num_replicas)
    return replica_batch_sizes(size, num_replicas)


def fills_in_order(dataset: Any, num_workers: int, num_replicas: int, batch_size: int) -> bool:
    """Whether TF 2.21 re-cuts this dataset's rows in order (``filled_steps``): one worker of several
    replicas, auto-sharding OFF, FILE or HINT, and a known batch size (else each batch is split alone)."""
    policy = dataset.options().experimental_distribute.auto_shard_policy
    return num_workers == 1 and num_replicas > 1 and batch_size > 0 and policy in _FILLING_POLICIES


def filled_steps(dataset: Any, num_replicas: int, batch_size: int) -> Iterator[list]:
    """Steps of one worker with auto-sharding OFF, FILE or HINT, as TF 2.21 rebatches them: the stream
    of rows re-cut in order into the replicas' batch sizes, so a partial batch's rows are followed by the
    next batch's (5 rows in batches of 4, repeated, over 2 replicas: [0, 1] [2, 3] | [4, 0] [1, 2] |
    [3, 4] -); a replica past the end gets None."""
    parts = iter(dataset.rebatch(replica_batch_sizes(batch_size, num_replicas)))
    for first in parts:
        step = [first, *itertools.islice(parts, num_replicas - 1)]
        yield step + [None] * (num_replicas - len(step))


def zipped_parts(element: Any) -> list | None:
    """The parts of a ``Dataset.zip`` element whose parts differ in dimension 0 (each cut along its own
    dimension 0, as TensorFlow cuts them), else None (the element is cut as one batch)."""
    if not isinstance(element, (ZippedTuple, ZippedDict)):
        return None
    parts = list(element.values()) if isinstance(element, dict) else list(element)
    sizes = set()
    for part in parts:
        sub = zipped_parts(part)
        sizes.update({-1} if sub is not None else {leading_size(part)})   # a nested zip of two sizes
    return parts if len(sizes) > 1 else None


def _split_zipped(element: Any, num_replicas: int) -> list[Any]:
    """Each part of a zip cut on its own. TensorFlow knows no batch size for the zip, so it cuts every batch
    of each part into consecutive slices of ``ceil(rows / replicas)`` (``partial_batch_sizes``)."""
    parts = zipped_parts(element)
    if parts is None:
        return _split_rows(element, partial_batch_sizes(leading_size(element), num_replicas))
    cut = [_split_zipped(p, num_replicas) for p in parts]
    if isinstance(element, dict):
        return [type(element)(zip(element.keys(), [c[r] for c in cut])) for r in range(num_replicas)]
    return [type(element)(c[r] for c in cut) for r in range(num_replicas)]


def _split_rows(element: Any, sizes: list[int]) -> list[Any]:
    bounds = [0]
    for c in sizes:
        bounds.append(bounds[-1] + c)
    return [map_structure(lambda leaf, a=bounds[r], b=bounds[r + 1]: leaf[a:b], element) for r in range(len(sizes))]


def split_element(element: Any, num_replicas: int, static_batch_size: int, num_workers: int) -> list[Any]:
    """Split one global batch into per-replica batches, in order (sizes from ``split_sizes``; a zip of parts
    batched to different sizes: each part on its own, ``_split_zipped``)."""
    if zipped_parts(element) is not None:
        return _split_zipped(element, num_replicas)
    if example_count(element) is not None:
        return split_examples(element, split_sizes(example_count(element), num_replicas, static_batch_size,
                                                   num_workers))
    return _split_rows(element, split_sizes(leading_size(element), num_replicas, static_batch_size, num_workers))

