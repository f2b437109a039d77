"""``md.data``: tf.data's input pipelines on torch tensors.

    import multidev as md
    ds = (md.data.Dataset.from_tensor_slices((x, y))
          .shuffle(10_000, seed=0)
          .batch(32)
          .prefetch(md.data.AUTOTUNE))
    for features, labels in ds:
        ...

What distributed input (``multidev/distribute/input.py``) builds on:

* ``graph.find_batch(ds)`` -> the ``batch``/``padded_batch`` node (``.batch_size``,
  ``.drop_remainder``) or None; ``graph.compute_batch_size(ds)`` -> int or -1.
* ``rebatching.per_worker_dataset(ds, num_workers, worker_index, replicas_per_worker)`` ->
  the worker's per-replica batches, ``replicas_per_worker`` consecutive ones per step
  (TF's shard-then-rebatch recipe); ``batch_sizes_for_worker``, ``split_batches`` and
  ``Dataset.rebatch`` are its parts.
* ``sharding.auto_shard(ds, num_workers, worker_index, policy=None)`` -> TF's
  ``AutoShardPolicy`` rewrite (policy from ``ds.options()`` by default).
* ``graph.file_readers(ds)`` -> reader nodes; ``reader.filenames`` is their file list.
* ``experimental.prefetch_to_device(device)`` -> copies batches to a device ahead of use.
"""

from multidev.data import experimental
from multidev.data.cardinality import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from multidev.data.dataset import AUTOTUNE, Dataset
from multidev.data.files import TextLineDataset
from multidev.data.grouping import DatasetSpec
from multidev.data.iterator import Iterator, Optional
from multidev.data.options import Options, ThreadingOptions
from multidev.data.spec import TensorSpec

__all__ = [
    "Dataset",
    "TextLineDataset",
    "TensorSpec",
    "DatasetSpec",
    "Iterator",
    "Optional",
    "Options",
    "ThreadingOptions",
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "experimental",
]
