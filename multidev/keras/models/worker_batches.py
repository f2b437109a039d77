"""Inputs of ``fit``/``evaluate``/``predict`` whose batches are already this worker's own, read as
``experimental_distribute_dataset`` reads them (split across this worker's replicas only, never
sharded again) instead of as global batches:

* a torch DataLoader whose ``DistributedSampler`` shards the data by worker (a DDP program's input):
  each batch is this worker's share of the global batch, as under DDP; a sampler whose layout is not
  the job's is refused there (``distribute/torch_sampler.py``);
* in ``fit`` and ``evaluate`` on several workers, an ``md.data.Dataset`` whose auto-shard policy gives each
  worker its own rebatched stream (OFF, the multi-worker tutorial's ``dataset_no_auto_shard``; FILE; HINT;
  AUTO over file readers), as TensorFlow's ``fit``/``evaluate`` read it (with OFF: the same examples on
  every worker, or each worker's own data), for the dataset's number of batches per pass
  (``StepsOfTheDataset``).
  DATA sharding (AUTO on in-memory data) is each worker's slices of every global batch, which the
  step runner's split already is;
* on one worker (``fit``, its validation, ``evaluate``, ``predict``), an ``md.data.Dataset`` with
  OFF/FILE/HINT whose batch size is known: TensorFlow re-cuts its rows in order into the replicas'
  batches, a partial batch's rows followed by the next batch's (``batch(4).repeat()`` of 5 examples:
  steps of rows 0-3, 4 0 1 2, 3 4 0 1).

A torch DataLoader without such a sampler on several workers is each worker's slices of every batch too;
each pass checks that the workers' first batches agree (``distribute/input_agreement.py``: a loader
sharded by ``RANK`` trained each worker on half its share, silently).
"""

from __future__ import annotations

from typing import Any

import torch.utils.data as tud

from multidev.data import graph
from multidev.data.dataset import Dataset
from multidev.distribute.batch_split import fills_in_order
from multidev.distribute.input_agreement import batch_print, check_same_first_batch
from multidev.distribute.input_lib import _worker_input
from multidev.distribute.torch_sampler import samplers_of
from multidev.keras.models.data_adapter import StepsOfTheDataset, known_length


def per_worker_input(model: Any, x: Any, own_streams: bool = False, mapped: bool = False) -> Any:
    """``x``, or its distributed dataset when its batches are this worker's own (see above);
    ``own_streams``: also for datasets sharded by FILE/HINT/OFF on several workers (``fit``, ``evaluate``);
    ``mapped``: Keras maps the dataset before distributing it (``class_weight``), so on one worker TF no
    longer knows its batch size and splits each batch on its own."""
    strategy = model.distribute_strategy
    if samplers_of(x):
        return x if strategy.num_replicas_in_sync == 1 else strategy.experimental_distribute_dataset(x)
    extended = strategy.extended
    if extended.num_workers > 1 and isinstance(x, tud.DataLoader):
        return SameOnEveryWorker(x, extended.worker_collective)
    if isinstance(x, Dataset) and _own_stream(x, extended, own_streams, mapped):
        distributed = strategy.experimental_distribute_dataset(x)
        steps = known_length(x)
        return distributed if steps is None else StepsOfTheDataset(distributed, steps)
    return x


def _own_stream(x: Dataset, extended: Any, own_streams: bool, mapped: bool) -> bool:
    if extended.num_workers > 1:
        return own_streams and not _worker_input(x, extended.num_workers, extended.worker_index)[0]
    if mapped:
        return False
    # one worker, OFF/FILE/HINT: TF's steps re-cut the rows in order across batches (batch_split.filled_steps)
    return fills_in_order(x, 1, extended.num_local_replicas, graph.compute_batch_size(x))



class SameOnEveryWorker:
    """A torch DataLoader every worker reads whole, keeping its slices of each batch: each pass first checks
    that the workers' first batches agree (``ValueError`` on every worker otherwise)."""

    def __init__(self, loader: tud.DataLoader, collective: Any):
        self.loader, self._collective = loader, collective

    def __len__(self) -> int:
        return len(self.loader)   # TypeError when the loader has no length, as the loader's own

    def __iter__(self):
        batches = iter(self.loader)
        first = next(batches, None)
        check_same_first_batch(self._collective, None if first is None else batch_print(first))
        if first is not None:
            yield first
            yield from batches
