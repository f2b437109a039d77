"""Reading and rewriting the dataset graph (for auto-sharding and distributed input).

Each dataset node lists the datasets it reads in ``_inputs``; ``_with_inputs`` copies a node
onto new inputs. These helpers answer what distributed input needs to know:

    >>> import multidev as md
    >>> from multidev.data import graph
    >>> ds = md.data.Dataset.range(16).batch(4).prefetch(2)
    >>> node = graph.find_batch(ds)
    >>> node.batch_size, node.drop_remainder
    (4, False)
"""

from __future__ import annotations

from typing import Callable, Iterator

from multidev.data.batching import BatchDataset
from multidev.data.combine import ConcatenateDataset, ZipDataset
from multidev.data.dataset import Dataset
from multidev.data.files import TextLineDataset
from multidev.data.mapping import FilterDataset, MapDataset
from multidev.data.prefetch import PrefetchDataset
from multidev.data.shuffle import ShuffleDataset
from multidev.data.stateful import AssertCardinalityDataset
from multidev.data.transforms import (
    CacheDataset,
    OptionsDataset,
    RepeatDataset,
    ShardDataset,
    SkipDataset,
    TakeDataset,
)

# TF's "batch size orthogonal" ops: compute_batch_size walks through them. A map may change the batch
# (TF 2.21 answers -1 for ``batch(4).map(f)``), so distributed input treats its batches as of unknown size.
BATCH_ORTHOGONAL = (
    PrefetchDataset, OptionsDataset, RepeatDataset, CacheDataset, TakeDataset, SkipDataset,
    ShardDataset, ShuffleDataset, FilterDataset, AssertCardinalityDataset,
)
# Nodes ``find_batch`` walks through: the orthogonal ones and maps (which keep it for per-batch functions).
BATCH_PRESERVING = (*BATCH_ORTHOGONAL, MapDataset)
# Nodes whose inputs must all have one batch size for the node to have it (TF: zip, concatenate).
_MULTIPLE_INPUTS = (ZipDataset, ConcatenateDataset)

# Trailing nodes a DATA shard is inserted under (TF: prefetch, options, finalize).
TRAILING = (PrefetchDataset, OptionsDataset)


def nodes(dataset: Dataset) -> Iterator[Dataset]:
    """Every node of the graph, sink first, depth-first over inputs."""
    yield dataset
    for source in dataset._inputs:
        yield from nodes(source)


def find_batch(dataset: Dataset) -> BatchDataset | None:
    """The ``batch``/``padded_batch`` node that sets this dataset's element batch size, or None.

    Walks from the sink through nodes that keep the batch size; stops (None) at anything
    else, e.g. ``unbatch`` or ``zip``.
    """
    node = dataset
    while True:
        if isinstance(node, BatchDataset):
            return node
        if not isinstance(node, BATCH_PRESERVING):
            return None
        node = node._inputs[0]


def compute_batch_size(dataset: Dataset) -> int:
    """The static batch size of the dataset's elements, or -1 if it cannot be determined: TF's
    ``compute_batch_size`` walk (the batch node under batch-size-orthogonal ops; a zip or concatenation
    of datasets of one batch size has it; a map, rebatch, unbatch or interleave gives -1). TF first reads a
    size off a fully known element_spec (a map of a ``drop_remainder`` batch: 4); this walk runs no map to
    learn its spec, and such batches are all full, so no split differs."""
    node = dataset
    while isinstance(node, BATCH_ORTHOGONAL):
        node = node._inputs[0]
    if isinstance(node, BatchDataset):
        return node.batch_size
    if isinstance(node, _MULTIPLE_INPUTS):
        sizes = {compute_batch_size(source) for source in node._inputs}
        return sizes.pop() if len(sizes) == 1 else -1
    return -1


def file_readers(dataset: Dataset) -> list[TextLineDataset]:
    """The reader nodes (``TextLineDataset``) in the graph; ``reader.filenames`` is their file list."""
    return [node for node in nodes(dataset) if isinstance(node, TextLineDataset)]


def rewrite(dataset: Dataset, replace: Callable[[Dataset], Dataset | None]) -> Dataset:
    """A copy of the graph where ``replace(node)`` (when not None) substitutes a node.

    Nodes above a substituted node are copied onto their new inputs; the original graph
    is left as it was.
    """
    replacement = replace(dataset)
    if replacement is not None:
        return replacement
    if not dataset._inputs:
        return dataset
    new_inputs = tuple(rewrite(source, replace) for source in dataset._inputs)
    if all(a is b for a, b in zip(new_inputs, dataset._inputs)):
        return dataset
    return dataset._with_inputs(*new_inputs)


def split_trailing(dataset: Dataset) -> tuple[list[Dataset], Dataset]:
    """(trailing prefetch/options nodes from the sink down, the node under them)."""
    trailing, node = [], dataset
    while isinstance(node, TRAILING):
        trailing.append(node)
        node = node._inputs[0]
    return trailing, node


def restack(trailing: list[Dataset], body: Dataset) -> Dataset:
    """Put ``trailing`` nodes (as returned by ``split_trailing``) back on top of ``body``."""
    for node in reversed(trailing):
        body = node._with_inputs(body)
    return body
