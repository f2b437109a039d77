"""``fit`` on several workers with a dataset whose auto-shard policy gives each worker its own batches.

TensorFlow's ``fit`` under ``MultiWorkerMirroredStrategy`` reads a ``tf.data.Dataset`` through
``experimental_distribute_dataset``. With DATA sharding (AUTO on in-memory data) every worker takes
its slices of each global batch, which is what the step runner does with a plain dataset. With OFF
(the multi-worker tutorial's ``dataset_no_auto_shard``), FILE, HINT, or AUTO over file readers,
each worker trains on its own rebatched stream instead (with OFF: the same examples on every
worker), so reading every global batch would give other numbers. Such a dataset goes through
``experimental_distribute_dataset`` here too; its per-worker batches reach the step runner as
``PerReplica`` values, which it takes as already split.
"""

from __future__ import annotations

from typing import Any

from multidev.data.dataset import Dataset
from multidev.distribute.input_lib import _worker_input
from multidev.values.distributed import DistributedValues, PerReplica, flatten, pack_as


def worker_input(model: Any, x: Any) -> Any:
    """``x``, or this worker's own batches of it when its policy does not shard by DATA (see above)."""
    strategy = model.distribute_strategy
    extended = strategy.extended
    if extended.num_workers == 1 or not isinstance(x, Dataset):
        return x
    every_batch, _ = _worker_input(x, extended.num_workers, extended.worker_index)
    if every_batch:
        return x
    return _OwnBatches(strategy.experimental_distribute_dataset(x))


class _OwnBatches:
    """Iterates a distributed dataset, each leaf a ``PerReplica`` (also with one local replica)."""

    def __init__(self, distributed: Any):
        self._distributed = distributed

    def __iter__(self):
        for element in self._distributed:
            leaves = flatten(element)
            if any(isinstance(leaf, DistributedValues) for leaf in leaves):
                yield element
            else:
                yield pack_as(element, [PerReplica((leaf,)) for leaf in leaves])
