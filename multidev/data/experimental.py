"""``md.data.experimental``: TF's experimental tf.data names (AUTOTUNE, AutoShardPolicy, ...).

    >>> import multidev as md
    >>> md.data.experimental.AUTOTUNE == md.data.AUTOTUNE == -1
    True
"""

from __future__ import annotations

import torch

from multidev.data.cardinality import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from multidev.data.csv_dataset import make_csv_dataset
from multidev.data.dataset import AUTOTUNE, Dataset
from multidev.data.device import copy_to_device, prefetch_to_device
from multidev.data.options import (AutoShardPolicy, AutotuneAlgorithm, AutotuneOptions, DistributeOptions,
                                   ExternalStatePolicy, OptimizationOptions, ThreadingOptions)
from multidev.data.stateful import assert_cardinality, choose_from_datasets, sample_from_datasets
from multidev.data.transforms import SHARD_HINT


def Counter(start: int = 0, step: int = 1, dtype=torch.int64) -> Dataset:  # noqa: N802 - TF's name
    """``tf.data.experimental.Counter`` (the guide's Titanic section; now ``Dataset.counter``)."""
    return Dataset.counter(start, step, dtype)


def cardinality(dataset: Dataset) -> int:
    """``dataset.cardinality()`` (TF 1's ``tf.data.experimental.cardinality``)."""
    return dataset.cardinality()


# TF's experimental transformations: functions of a dataset, for ``dataset.apply(...)``.

def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes=None,
                              padding_values=None, pad_to_bucket_boundary=False, no_padding=False,
                              drop_remainder=False):
    """``dataset.apply(bucket_by_sequence_length(...))``: see ``Dataset.bucket_by_sequence_length``."""
    return lambda dataset: dataset.bucket_by_sequence_length(
        element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes, padding_values,
        pad_to_bucket_boundary, no_padding, drop_remainder)


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    """``dataset.apply(group_by_window(...))``: see ``Dataset.group_by_window``."""
    return lambda dataset: dataset.group_by_window(key_func, reduce_func, window_size, window_size_func)


def scan(initial_state, scan_func):
    """``dataset.apply(scan(...))``: see ``Dataset.scan``."""
    return lambda dataset: dataset.scan(initial_state, scan_func)


def take_while(predicate):
    """``dataset.apply(take_while(...))``: see ``Dataset.take_while``."""
    return lambda dataset: dataset.take_while(predicate)


def unique():
    """``dataset.apply(unique())``: see ``Dataset.unique``."""
    return lambda dataset: dataset.unique()


def unbatch():
    """``dataset.apply(unbatch())``: see ``Dataset.unbatch``."""
    return lambda dataset: dataset.unbatch()


def enumerate_dataset(start=0):
    """``dataset.apply(enumerate_dataset())``: see ``Dataset.enumerate``."""
    return lambda dataset: dataset.enumerate(start)


def get_single_element(dataset):
    """``dataset.get_single_element()``."""
    return dataset.get_single_element()


def __getattr__(name: str):
    """``md.data.experimental.X`` that multidev lacks: an AttributeError listing what it has."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}: multidev does not implement "
                         f"tf.data.experimental.{name}.{_INSTEAD.get(name, '')} md.data.experimental offers: "
                         f"{', '.join(sorted(__all__))}; md.data.Dataset has the stable tf.data methods.")


#: What to write instead of a tf.data.experimental name that TensorFlow's tutorials use.
_INSTEAD = {
    "CsvDataset": " Use md.data.experimental.make_csv_dataset (batches of columns), or read the CSV into arrays "
                  "(numpy.loadtxt, pandas.read_csv, the csv module) and build the dataset with "
                  "md.data.Dataset.from_tensor_slices((features, labels)); or md.data.TextLineDataset(path).skip(1)"
                  ".map(parse_line).",
}


__all__ = [
    "AUTOTUNE",
    "Counter",
    "AutoShardPolicy",
    "AutotuneAlgorithm",
    "AutotuneOptions",
    "ExternalStatePolicy",
    "DistributeOptions",
    "OptimizationOptions",
    "ThreadingOptions",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "SHARD_HINT",
    "cardinality",
    "assert_cardinality",
    "bucket_by_sequence_length",
    "choose_from_datasets",
    "enumerate_dataset",
    "get_single_element",
    "group_by_window",
    "make_csv_dataset",
    "sample_from_datasets",
    "scan",
    "take_while",
    "unbatch",
    "unique",
    "copy_to_device",
    "prefetch_to_device",
]
