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

Where md.data deliberately differs from tf.data 2.21 (tests/conformance/cases/data_guide.py runs the
tf.data guide, the Dataset API examples and the Distributed input tutorial on both; KNOWN in
tests/conformance/test_conformance.py lists these):

* ``element_spec`` after ``map`` and ``scan`` is read off the first two elements (a dimension that
  differs between them is None, as TF shows the guide's ``tf.fill([x], x)``), after ``flat_map`` and
  ``interleave`` off the first: multidev runs Python, it does not trace ``map_func``, so a length
  that varies only later keeps the first elements' size where TF shows None. Declare the shape with
  ``from_generator(output_signature=...)`` where a consumer needs None.
* ``from_generator`` without ``output_signature``/``output_types`` reads the structure and dtypes off
  the first element (TF raises TypeError).
* A Python number as ``padding_values`` or as the initial state of ``reduce``/``scan`` takes the
  elements' (the result's) dtype; TF makes it int32/float32 and raises TypeError against int64.
* String components are Python ``str`` (batches: numpy object arrays of ``str``): torch has no
  string tensors. A ``for`` loop hands them out with TF's ``.numpy()`` (bytes; ``data/text.py``),
  and ``as_numpy_iterator()`` gives ``bytes`` as TF does; inside ``map`` they are plain ``str``.
* Errors TF raises by accident of its implementation get the type the mistake deserves, with a
  message: interleave's ``map_func`` returning no dataset -> TypeError (TF: AttributeError); a
  ``pad_to_bucket_boundary`` element too long -> InvalidArgumentError (TF wraps it in InternalError);
  ``experimental_distribute_dataset`` of an unbatched dataset -> ValueError (TF: IndexError);
  ``rebatch([])``, ``concatenate([1])``, ``with_options(3)``, a tuple from ``take_while``'s predicate
  (TF: IndexError/AttributeError); unsorted ``bucket_boundaries`` raise ValueError (TF accepts them).
  Where TF's type is reasonable but multidev raised another before, the error is both
  (``padded_shapes`` too small: DataLossError and InvalidArgumentError; a map_func that is not
  callable, a value that converts to no tensor, a float group key: ValueError and TypeError).
* Random orders (``shuffle``, ``sample_from_datasets``) are reproducible under a seed within
  multidev, not TF's sequences; only their properties (every element once per epoch, buffer
  bounds) are TF's.
"""

from multidev.data import experimental
from multidev.data.cardinality import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from multidev.data.dataset import AUTOTUNE, Dataset
from multidev.data.files import TextLineDataset
from multidev.data.grouping import DatasetSpec
from multidev.data.iterator import Iterator, Optional
from multidev.data.options import Options, ThreadingOptions
from multidev.data.spec import TensorSpec

#: tf.data names multidev does not offer -> what to do instead.
_NOT_OFFERED = {
    "TFRecordDataset": "TFRecord files hold protobuf records (tf.train.Example) and multidev parses no protobufs; "
                       "convert the data once to arrays (numpy .npy, safetensors) and use "
                       "md.data.Dataset.from_tensor_slices, or md.data.Dataset.from_generator over your own reader",
    "FixedLengthRecordDataset": "read the file with numpy.fromfile or numpy.memmap (dtype, offset=header_bytes), "
                                "reshape to (records, record_bytes) and use md.data.Dataset.from_tensor_slices",
}


def __getattr__(name: str):
    """``md.data.X`` that multidev lacks: an AttributeError that says what to use instead."""
    if name in _NOT_OFFERED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}: multidev does not implement "
                             f"tf.data.{name}; {_NOT_OFFERED[name]}.")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
