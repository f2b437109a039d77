"""The less common ``md.data.Dataset`` methods (windowing, bucketing, stateful and multi-dataset
transformations), kept out of dataset.py; ``Dataset`` inherits them. A TF method multidev does not
offer raises an AttributeError that says so and what to use instead."""

from __future__ import annotations

from typing import Any, Callable

#: tf.data.Dataset methods multidev does not implement -> what to do instead.
_NOT_OFFERED = {
    "save": "multidev saves no datasets (TF's snapshot format); use cache(filename) to keep elements on disk",
    "load": "multidev loads no saved TF datasets; use cache(filename) or from_tensor_slices on your arrays",
    "snapshot": "use cache(filename): it writes the elements once and replays them in later runs",
    "ragged_batch": "torch has no ragged tensors; use padded_batch (or bucket_by_sequence_length)",
    "sparse_batch": "torch sparse tensors are not dataset components; use padded_batch",
    "rejection_resample": "resample with filter() or sample_from_datasets over per-class datasets",
    "ignore_errors": "catch the error inside map_func (return a marker) and filter() the marked elements",
    "random": "use Dataset.counter().map(...) with a seeded torch.Generator",
    "fingerprint": "not offered",
}


class DatasetMethods:
    """Mixin of ``md.data.Dataset``: see the module docstring."""

    def window(self, size: int, shift: int | None = None, stride: int = 1, drop_remainder: bool = False,
               name: str | None = None) -> Any:
        """Windows of ``size`` elements, each a dataset per component; consume them with ``flat_map``.

        Example: ``Dataset.range(7).window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(3))``
        -> [0, 1, 2], [2, 3, 4], [4, 5, 6].
        """
        from multidev.data.grouping import WindowDataset

        return WindowDataset(self, size, shift, stride, drop_remainder)

    def group_by_window(self, key_func: Callable, reduce_func: Callable, window_size: int | None = None,
                        window_size_func: Callable | None = None, name: str | None = None) -> Any:
        """Group elements by ``key_func`` (an int64 key); each full window (and at the end each rest,
        in key order) becomes ``reduce_func(key, window_dataset)``'s elements."""
        from multidev.data.grouping import GroupByWindowDataset

        return GroupByWindowDataset(self, key_func, reduce_func, window_size, window_size_func)

    def bucket_by_sequence_length(self, element_length_func: Callable, bucket_boundaries: list,
                                  bucket_batch_sizes: list, padded_shapes: Any = None, padding_values: Any = None,
                                  pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                                  drop_remainder: bool = False, name: str | None = None) -> Any:
        """Batch elements of similar length together, padding each batch (TF's bucketing recipe).

        Example: ``ds.bucket_by_sequence_length(lambda x: md.shape(x)[0], [10, 20], [32, 32, 16])``.
        """
        from multidev.data.grouping import bucket_by_sequence_length

        return bucket_by_sequence_length(self, element_length_func, bucket_boundaries, bucket_batch_sizes,
                                         padded_shapes, padding_values, pad_to_bucket_boundary, no_padding,
                                         drop_remainder)

    def scan(self, initial_state: Any, scan_func: Callable, name: str | None = None) -> Any:
        """A running state: ``scan_func(state, element) -> (new_state, output)``."""
        from multidev.data.stateful import ScanDataset

        return ScanDataset(self, initial_state, scan_func)

    def take_while(self, predicate: Callable, name: str | None = None) -> Any:
        """The elements until ``predicate`` first returns False."""
        from multidev.data.stateful import TakeWhileDataset

        return TakeWhileDataset(self, predicate)

    def unique(self, name: str | None = None) -> Any:
        """Each distinct element once (scalar int32/int64/string elements)."""
        from multidev.data.stateful import UniqueDataset

        return UniqueDataset(self)

    def get_single_element(self, name: str | None = None) -> Any:
        """The dataset's only element (InvalidArgumentError when it has none or several)."""
        from multidev.data.stateful import get_single_element

        return get_single_element(self)

    @staticmethod
    def choose_from_datasets(datasets: list, choice_dataset: Any, stop_on_empty_dataset: bool = True) -> Any:
        """Element ``i`` from ``datasets[choice_dataset[i]]`` (int64 choices)."""
        from multidev.data.stateful import choose_from_datasets

        return choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)

    @staticmethod
    def sample_from_datasets(datasets: list, weights: Any = None, seed: int | None = None,
                             stop_on_empty_dataset: bool = False,
                             rerandomize_each_iteration: bool | None = None) -> Any:
        """Elements drawn at random from ``datasets`` by ``weights`` (reproducible within multidev under ``seed``)."""
        from multidev.data.stateful import sample_from_datasets

        return sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration)

    def __getattr__(self, name: str) -> Any:
        if name in _NOT_OFFERED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}: multidev does not "
                                 f"implement tf.data.Dataset.{name}; {_NOT_OFFERED[name]}.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
