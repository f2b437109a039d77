"""Distributed input: ``experimental_distribute_dataset`` and ``distribute_datasets_from_function``.

A distributed dataset yields, per global batch, one slice per replica in replica order (the seed's
``range(16).batch(4)`` over two replicas gives ``[0, 1]`` and ``[2, 3]``), each already on its
replica's device. On one worker a batch is cut as TensorFlow cuts it, in consecutive slices of
``ceil(B / n)`` rows (100 examples in batches of 16 on 2 replicas end with ``[2, 2]``, not ``[4, 0]``;
16 over 3 replicas: ``[6, 6, 4]``; auto-sharding OFF re-cuts the rows: ``batch_split``): every
example is seen exactly once, none is padded, duplicated or dropped.
"""

from __future__ import annotations

import collections
import functools
import itertools
from typing import Any, Callable, Iterator

import torch

from multidev._core.errors import NotFoundError
from multidev.data import graph
from multidev.data.dataset import Dataset
from multidev.data.iterator import Iterator as DataIterator
from multidev.data.options import AutoShardPolicy
from multidev.data.spec import TensorSpec
from multidev.data.sharding import shard_by_file, shard_by_hint
from multidev.data.threads import BackgroundIterator
from multidev.devices.stream_order import to_device
from multidev.distribute.input_options import (InputContext, InputOptions, InputReplicationMode,
                                               check_for_datasets_from_function)
from multidev.distribute.input_agreement import batch_print, check_same_first_batch, reads_torch
from multidev.distribute.pipeline_random import RoundStreams, shared_generators
from multidev.distribute.batch_split import filled_steps, fills_in_order, leading_size, split_element
from multidev.distribute.example_lists import example_count, pack_examples
from multidev.distribute.torch_sampler import (PIPELINES, check_examples_along_dim0, check_loader_feeds_every_replica,
                                               check_sampled_batch, sampled_batch_minimum,
                                               equal_on_every_worker, loader_batch_sizes, reads_worker_share)
from multidev.values import context
from multidev.values.distributed import PerReplica, PerReplicaSpec, flatten, map_structure, pack_as


def _per_replica_spec(spec: Any, num_replicas: int) -> Any:
    return spec if num_replicas == 1 else map_structure(lambda s: PerReplicaSpec(*(s,) * num_replicas), spec)


def _replica_slice_spec(spec: Any, num_replicas_in_sync: int) -> Any:
    """The spec of one replica's slice of a global batch described by ``spec``: a known batch size
    the replicas divide becomes its share, any other becomes None (TF's rebatched spec)."""
    def leaf(s: Any) -> Any:
        if not isinstance(s, TensorSpec) or not s.shape:
            return s
        batch = s.shape[0]
        share = batch // num_replicas_in_sync if batch is not None and batch % num_replicas_in_sync == 0 else None
        return TensorSpec((share,) + s.shape[1:], s.dtype, s.name)
    return map_structure(leaf, spec)


def _to_device(element: Any, device: torch.device) -> Any:
    return map_structure(lambda leaf: to_device(leaf, device) if isinstance(leaf, torch.Tensor) else leaf, element)


def _empty_like(element: Any) -> Any:
    """No examples shaped like ``element`` (tensors, batches of strings; a scalar gives an empty vector)."""
    return map_structure(lambda leaf: leaf.reshape(-1)[:0] if leaf.ndim == 0 else leaf[:0], element)


def _empty_as_spec(spec: Any, element: Any) -> Any:
    """TF's batch for a replica past the end: no rows, the other dimensions of ``spec`` (unknown
    ones 0, as TF 2.21 fills them), ``element``'s dtypes; ``_empty_like`` where the spec has no rank."""
    specs, leaves = flatten(spec), flatten(element)
    if len(specs) != len(leaves):
        return _empty_like(element)

    def empty(s: Any, leaf: Any) -> Any:
        if isinstance(s, TensorSpec) and s.shape and isinstance(leaf, torch.Tensor) and leaf.dim() == len(s.shape):
            return torch.zeros((0, *[d or 0 for d in s.shape[1:]]), dtype=leaf.dtype, device=leaf.device)
        return _empty_like(leaf)
    return pack_as(element, [empty(s, leaf) for s, leaf in zip(specs, leaves)])


def _check_not_in_replica(what: str) -> None:
    if context.current_replica_id() is not None:
        raise RuntimeError(
            f"{what} cannot be used inside strategy.run (replica context): iterate the distributed "
            "dataset outside and pass each element to strategy.run(step, args=(element,))."
        )


def _check_dataset(dataset: Any, what: str) -> Dataset:
    """An ``md.data.Dataset``; a torch ``DataLoader`` becomes one whose elements are its batches (for
    ``experimental_distribute_dataset`` each is a global batch, split per replica)."""
    if isinstance(dataset, Dataset):
        return dataset
    import torch.utils.data as tud

    if isinstance(dataset, tud.DataLoader):
        return Dataset.from_torch(dataset)
    if isinstance(dataset, tud.Dataset):
        # Its items are single examples by torch's contract; splitting one would cut a feature row.
        raise TypeError(
            f"{what} takes batches: a {type(dataset).__name__} (torch.utils.data.Dataset) yields single examples. "
            "Wrap it in torch.utils.data.DataLoader(dataset, batch_size=GLOBAL_BATCH_SIZE) (each of its batches "
            "is then the global batch, split across the replicas) or use "
            "md.data.Dataset.from_torch(dataset).batch(GLOBAL_BATCH_SIZE)."
        )
    raise TypeError(
        f"{what} expects a md.data.Dataset or a torch.utils.data.DataLoader, got {type(dataset).__name__}. "
        "Wrap arrays with md.data.Dataset.from_tensor_slices(...) or torch datasets with "
        "md.data.Dataset.from_torch(...)."
    )


class _DistributedBase:
    """Shared iteration: turns a stream of per-replica element lists into distributed values."""

    def __init__(self, strategy: Any, options: InputOptions | None):
        if options is not None and not isinstance(options, InputOptions):
            raise TypeError(f"options must be a md.distribute.InputOptions, got {options!r}.")
        self._strategy = strategy
        self._options = options or InputOptions()
        self._devices = list(strategy.extended.torch_devices)

    def _per_replica_stream(self) -> Iterator[list]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _distributed_stream(self) -> Iterator[Any]:
        for parts in self._per_replica_stream():
            yield self._pack([_to_device(p, d) for p, d in zip(parts, self._devices)])

    def _pack(self, parts: list) -> Any:
        if len(parts) == 1:
            return parts[0]
        if any(example_count(p) is not None for p in parts):   # lists of examples, of each replica's length
            return pack_examples(parts)
        return pack_as(parts[0], [PerReplica(column) for column in zip(*(flatten(p) for p in parts))])

    def _fetch_ahead(self) -> bool:
        fetch = self._options.experimental_fetch_to_device
        return fetch is not False and any(d.type != "cpu" for d in self._devices)

    def _iterate(self) -> Iterator[Any]:
        """The stream of distributed elements (fetched ahead on a thread for accelerators)."""
        if not self._fetch_ahead():
            yield from self._distributed_stream()
            return
        background = BackgroundIterator(self._distributed_stream, self._options.experimental_per_replica_buffer_size,
                                        name="md.distribute.input")
        try:
            yield from background
        finally:
            background.stop()

    def __iter__(self) -> "DistributedIterator":
        _check_not_in_replica("Iterating a distributed dataset")
        return DistributedIterator(self)

    def reduce(self, initial_state: Any, reduce_fn: Callable[[Any, Any], Any]) -> Any:
        """``state = reduce_fn(state, element)`` over the distributed elements (each a ``PerReplica``
        structure), as TF's ``DistributedDataset.reduce``; returns the final state."""
        state = initial_state
        for element in self:
            state = reduce_fn(state, element)
        return state


class DistributedIterator(DataIterator):
    """Iterator over a distributed dataset: ``next()``, ``get_next()`` (``OutOfRangeError`` at the
    end), ``get_next_as_optional()``, ``element_spec``; ``close()`` stops any prefetch thread."""

    def __next__(self) -> Any:
        _check_not_in_replica("Iterating a distributed dataset")
        return super().__next__()


def _worker_input(dataset: Dataset, num_workers: int, worker_index: int) -> tuple[bool, Dataset]:
    """What this worker reads, following ``AutoShardPolicy``; True means "every global batch,
    keep this worker's slices" (DATA sharding), False "this dataset's batches are all ours"."""
    if num_workers == 1:
        return False, dataset
    policy = dataset.options().experimental_distribute.auto_shard_policy
    if policy == AutoShardPolicy.OFF:
        return False, dataset
    if policy == AutoShardPolicy.DATA:
        return True, dataset
    if policy == AutoShardPolicy.HINT:
        return False, shard_by_hint(dataset, num_workers, worker_index)
    try:
        return False, shard_by_file(dataset, num_workers, worker_index)
    except NotFoundError:
        if policy == AutoShardPolicy.FILE:
            raise
        return True, dataset  # AUTO: FILE sharding impossible (no file source), shard by DATA


class DistributedDataset(_DistributedBase):
    """``strategy.experimental_distribute_dataset(dataset)``: global batches split across replicas."""

    def __init__(self, strategy: Any, dataset: Any, options: InputOptions | None = None):
        super().__init__(strategy, options)
        loader, dataset = dataset, _check_dataset(dataset, "experimental_distribute_dataset")
        if self._options.experimental_replication_mode is InputReplicationMode.PER_REPLICA:
            raise NotImplementedError(   # TensorFlow's type for this
                "InputReplicationMode.PER_REPLICA is only supported in `distribute_datasets_from_function`; "
                "experimental_distribute_dataset splits one dataset per worker. Use "
                "strategy.distribute_datasets_from_function(dataset_fn, options) for per-replica datasets."
            )
        extended = strategy.extended
        self._num_workers, self._worker_index = extended.num_workers, extended.worker_index
        self._global_batch_size = graph.compute_batch_size(dataset)
        # A DistributedSampler's loader (DDP's input): each batch is this worker's share, as under DDP.
        self._worker_share = reads_worker_share(dataset, self._num_workers, self._worker_index,
                                                "experimental_distribute_dataset")
        replicas = len(self._devices) * (1 if self._worker_share else self._num_workers)
        check_loader_feeds_every_replica(loader, replicas)
        self._every_batch, self._dataset = ((False, dataset) if self._worker_share
                                            else _worker_input(dataset, self._num_workers, self._worker_index))
        # The loader's own batches (not re-sharded): their example counts, to check each is batch-first; a
        # batch_sampler's batches, whose sizes are unknown ahead: each must feed every replica.
        self._examples = loader_batch_sizes(loader) if self._dataset is dataset else None
        self._fewest = sampled_batch_minimum(loader, replicas) if self._dataset is dataset else 0
        # One worker, auto-sharding OFF/FILE/HINT, batch size known: TF 2.21 re-cuts the rows in order.
        self._fill_in_order = fills_in_order(dataset, self._num_workers, len(self._devices), self._global_batch_size)
        # Every worker keeps its slice of each torch batch: the workers check they read the same first batch.
        self._agree, self._first_prints = self._every_batch and reads_torch(dataset), collections.deque()
        # Workers reading their own batches (FILE/HINT/OFF) may run out at different steps.
        self._lockstep = self._num_workers > 1 and not self._every_batch and not equal_on_every_worker(dataset)

    def _fetch_ahead(self) -> bool:
        return not self._lockstep and super()._fetch_ahead()   # lockstep collectives: caller's thread only

    def _iterate(self) -> Iterator[Any]:
        stream = super()._iterate()
        if not self._agree:
            yield from stream
            return
        try:   # the first element: on the caller's thread, whether or not a thread fetches ahead
            first = next(stream, None)
            print_ = self._first_prints.popleft() if first is not None and self._first_prints else None
            check_same_first_batch(self._strategy.extended.worker_collective, print_)
            if first is not None:
                yield first
                yield from stream
        finally:
            stream.close()

    def _per_replica_stream(self) -> Iterator[list]:
        stream = self._own_stream()
        if self._lockstep:
            stream = self._in_lockstep(stream)
        return stream

    def _in_lockstep(self, stream: Iterator[list]) -> Iterator[list]:
        """TensorFlow's rule for workers reading different data: each step the workers sum a
        "has data" flag; a worker that ran out gets empty batches until every worker has."""
        extended = self._strategy.extended
        template = None
        for parts in itertools.chain(stream, itertools.repeat(None)):
            has = torch.tensor([0 if parts is None else 1], dtype=torch.int64)
            if int(extended.worker_collective.sum(has).item()) == 0:
                return
            if parts is None:
                parts = [_empty_like(p) for p in template] if template else self._empty_parts()
            template = parts
            yield parts

    def _empty_parts(self) -> list:
        def empty(spec: Any) -> Any:
            if isinstance(spec.dtype, torch.dtype) and spec.shape is not None:
                return torch.zeros((0, *[d or 0 for d in spec.shape[1:]]), dtype=spec.dtype)
            return []
        return [map_structure(empty, self._dataset.element_spec) for _ in self._devices]

    def _own_stream(self) -> Iterator[list]:
        n = len(self._devices)
        total, first = n * self._num_workers, self._worker_index * n
        if self._fill_in_order:
            for step in filled_steps(self._dataset, n, self._global_batch_size):
                yield [_empty_as_spec(self._dataset.element_spec, step[0]) if p is None else p for p in step]
            return
        for index, element in enumerate(self._dataset):
            if index == 0 and self._agree:
                self._first_prints.append(batch_print(element))
            if self._examples is not None and index < len(self._examples):
                check_examples_along_dim0(index, self._examples[index], leading_size(element), flatten(element)[0])
            check_sampled_batch(index, leading_size(element), self._fewest)
            if self._worker_share:   # this worker's own batch: its replicas' slices, one step each
                yield split_element(element, n, self._global_batch_size, self._num_workers) if n > 1 else [element]
                continue
            if total == 1:
                yield [element]
                continue
            chunks = split_element(element, total, self._global_batch_size, self._num_workers)
            if self._every_batch:  # DATA: every worker reads each global batch and keeps its replicas' slices
                yield chunks[first:first + n]
            else:  # FILE/HINT/OFF: this worker's own batches, n replica slices per step
                for i in range(0, total, n):
                    group = chunks[i:i + n]
                    if any(leading_size(c) for c in group):
                        yield group

    @property
    def element_spec(self) -> Any:
        """``PerReplicaSpec`` leaves of each replica's slice with several replicas (the dataset's spec
        with one), as TF."""
        if len(self._devices) == 1 and self._strategy.num_replicas_in_sync == 1:
            return self._dataset.element_spec
        return _per_replica_spec(_replica_slice_spec(self._dataset.element_spec, self._strategy.num_replicas_in_sync),
                                 len(self._devices))

    @property
    def cardinality(self) -> int:
        """The number of global batches (a property, as TF's ``DistributedDataset.cardinality``),
        or ``md.data.INFINITE_CARDINALITY`` / ``UNKNOWN_CARDINALITY``."""
        return self._dataset.cardinality()

    def __len__(self) -> int:
        return len(self._dataset)


def _pipeline_input(dataset_fn: Callable[[InputContext], Any], ctx: InputContext) -> tuple[Any, Dataset]:
    """``dataset_fn(ctx)`` and it as a Dataset; a DistributedSampler in it must be this pipeline's (else it
    would feed several pipelines the same examples)."""
    raw = dataset_fn(ctx)
    what = "distribute_datasets_from_function"
    reads_worker_share(raw, ctx.num_input_pipelines, ctx.input_pipeline_id, what, PIPELINES)
    return raw, _check_dataset(raw, what)


def _next_or_none(iterator: Iterator | None) -> Any:
    """The iterator's next element; None at its end (or for an iterator already ended)."""
    return None if iterator is None else next(iterator, None)


class DistributedDatasetsFromFunction(_DistributedBase):
    """``strategy.distribute_datasets_from_function(fn)``: the function builds per-replica batches."""

    def __init__(self, strategy: Any, dataset_fn: Callable[[InputContext], Any], options: InputOptions | None = None):
        super().__init__(strategy, options)
        if not callable(dataset_fn):
            raise TypeError(f"distribute_datasets_from_function needs a callable dataset_fn, got {dataset_fn!r}.")
        check_for_datasets_from_function(self._options)
        extended = strategy.extended
        n = len(self._devices)
        if self._options.experimental_replication_mode is InputReplicationMode.PER_WORKER:
            contexts = [InputContext(extended.num_workers, extended.worker_index, strategy.num_replicas_in_sync)]
        else:
            pipelines = extended.num_workers * n
            contexts = [InputContext(pipelines, extended.worker_index * n + r, strategy.num_replicas_in_sync)
                        for r in range(n)]
        self._loaders, self._datasets = map(list, zip(*(_pipeline_input(dataset_fn, ctx) for ctx in contexts)))

    def _per_replica_stream(self) -> Iterator[list]:
        n = len(self._devices)
        if len(self._datasets) == 1:
            it = iter(self._datasets[0])
            while True:
                parts = []
                for _ in range(n):
                    try:
                        parts.append(next(it))
                    except StopIteration:
                        break
                if not parts:
                    return
                if len(parts) < n:   # replicas past the end get no examples
                    if any(leaf.dim() == 0 for leaf in flatten(parts[-1])):
                        return   # unbatched elements: TensorFlow drops the last, incomplete round
                    parts += [_empty_as_spec(self._datasets[0].element_spec, parts[-1])] * (n - len(parts))
                yield parts
        else:
            rounds = self._rounds()
            iterators: list[Iterator | None] = rounds([functools.partial(iter, d) for d in self._datasets])
            while True:
                last = rounds([functools.partial(_next_or_none, it) for it in iterators])
                iterators = [it if x is not None else None for it, x in zip(iterators, last)]
                if all(x is None for x in last):
                    return
                if any(x is None for x in last):   # the spec only then: inferring it iterates a loader (draws)
                    template = next(p for p in last if p is not None)
                    empty = _empty_as_spec(self._datasets[0].element_spec, template)
                    last = [p if p is not None else empty for p in last]
                yield last

    def _rounds(self) -> Callable[[list], list]:
        """Reads one element of each pipeline as DDP's ranks read theirs (``pipeline_random``): on the
        caller's thread only (a fetch-ahead thread reads with the streams as they are)."""
        if self._fetch_ahead():
            return lambda calls: [c() for c in calls]
        return RoundStreams(shared_generators(self._loaders), self._strategy.extended.replica_random_streams).round

    @property
    def element_spec(self) -> Any:
        """``PerReplicaSpec`` leaves with several replicas (the dataset's spec with one), as TF."""
        return _per_replica_spec(self._datasets[0].element_spec, len(self._devices))

    @property
    def cardinality(self) -> int:
        """The cardinality of the (first) dataset ``dataset_fn`` built, as TF reports it."""
        return self._datasets[0].cardinality()
