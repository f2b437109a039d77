"""``md.data.Dataset``: a lazy, re-iterable input pipeline of torch tensors (tf.data's API).

    >>> import multidev as md
    >>> ds = md.data.Dataset.range(16).batch(4)
    >>> [b.tolist() for b in ds][:2]
    [[0, 1, 2, 3], [4, 5, 6, 7]]

Every dataset is a node of a small graph: ``_inputs`` holds the datasets it reads from, and
``_iterate()`` returns a fresh Python generator each time, so iterating twice starts over.
Graph rewrites (auto-sharding) rebuild nodes with ``_with_inputs``.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import copy
from typing import Any, Callable, Iterator as _PyIterator

import numpy as np
import torch

from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data.dataset_methods import DatasetMethods
from multidev.data.iterator import Iterator
from multidev.data.options import Options
from multidev.data.spec import TensorSpec

AUTOTUNE = -1

_PEEKING = contextvars.ContextVar("md_data_peeking", default=False)


@contextlib.contextmanager
def peeking():
    """Marks iteration done only to infer an element spec (shuffle does not advance its epoch)."""
    token = _PEEKING.set(True)
    try:
        yield
    finally:
        _PEEKING.reset(token)


def is_peeking() -> bool:
    """True while an element spec is being inferred by iterating."""
    return _PEEKING.get()


class Dataset(DatasetMethods, abc.ABC):
    """Base of every dataset node; the TF transformation methods live here."""

    _inputs: tuple = ()

    # ------------------------------------------------------------------ node interface

    @abc.abstractmethod
    def _iterate(self) -> _PyIterator:
        """A fresh generator over this dataset's elements."""

    @abc.abstractmethod
    def _cardinality(self) -> int:
        """Number of elements, or INFINITE_CARDINALITY / UNKNOWN_CARDINALITY."""

    @abc.abstractmethod
    def _compute_element_spec(self) -> Any:
        """The structure of TensorSpecs of one element."""

    def _index_source(self) -> tuple[Callable[[], _PyIterator], Callable[[list], Any]] | None:
        """For datasets of rows of in-memory arrays: (make row-index iterator, gather rows).

        ``batch`` uses it to build a batch with one gather instead of stacking single rows;
        the element order is the same as iterating. None where elements are not rows.
        """
        return None

    def _with_inputs(self, *inputs: "Dataset") -> "Dataset":
        """A copy of this node reading from ``inputs`` instead (used by graph rewrites)."""
        clone = copy.copy(self)
        clone._inputs = tuple(inputs)
        clone.__dict__.pop("_spec_cache", None)
        return clone

    # ------------------------------------------------------------------ inspection

    @property
    def element_spec(self) -> Any:
        """The TensorSpec structure of one element (computed once, lazily)."""
        if "_spec_cache" not in self.__dict__:
            self._spec_cache = self._compute_element_spec()
        return self._spec_cache

    def cardinality(self) -> int:
        """Element count, or ``md.data.INFINITE_CARDINALITY`` (-1) / ``UNKNOWN_CARDINALITY`` (-2).

        Example: ``md.data.Dataset.range(10).batch(3).cardinality()`` is 4 (an int with TF's
        ``.numpy()``, so ``ds.cardinality().numpy()`` as in TF's docs works too).
        """
        return _card.Cardinality(self._cardinality())

    def __len__(self) -> int:
        n = self._cardinality()
        if n == _card.INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if n == _card.UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        return True  # __len__ may raise; a dataset is always truthy, as in TF

    def options(self) -> Options:
        """The options of this dataset: its inputs' options merged with those set downstream."""
        merged = Options()
        for source in self._inputs:
            merged = merged.merge(source.options())
        return merged

    def __iter__(self) -> Iterator:
        return Iterator(self)

    def as_numpy_iterator(self) -> _PyIterator:
        """Iterate elements as numpy arrays (strings as ``bytes``, as TF).

        Example: ``list(md.data.Dataset.range(3).as_numpy_iterator())`` is ``[0, 1, 2]``.
        """
        for element in self:
            yield structure.map_structure(_to_numpy, element)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} element_spec={self.element_spec}>"

    # ------------------------------------------------------------------ constructors

    @staticmethod
    def from_tensor_slices(tensors: Any, name: str | None = None) -> "Dataset":
        """One element per row of ``tensors`` (tensors, arrays, lists, or tuples/dicts of them).

        Example: ``md.data.Dataset.from_tensor_slices((x, y))`` yields ``(x[i], y[i])``.
        A ``torch.utils.data`` Dataset/DataLoader is read as ``from_torch`` reads it. Ragged
        Python lists raise ValueError (as in TF); a numpy object array of sequences (e.g. Keras'
        reuters ``x_train``) gives variable-length rows, to be batched with ``padded_batch``.
        """
        import torch.utils.data as tud

        from multidev.data.sources import TensorSliceDataset

        if isinstance(tensors, (tud.Dataset, tud.DataLoader)):
            return Dataset.from_torch(tensors)
        return TensorSliceDataset(tensors)

    @staticmethod
    def from_tensors(tensors: Any, name: str | None = None) -> "Dataset":
        """A dataset of exactly one element, ``tensors``."""
        from multidev.data.sources import TensorDataset

        return TensorDataset(tensors)

    @staticmethod
    def from_generator(generator: Callable, output_types: Any = None, output_shapes: Any = None,
                       args: Any = None, output_signature: Any = None, name: str | None = None) -> "Dataset":
        """Elements produced by calling ``generator(*args)`` anew on each iteration.

        Example: ``Dataset.from_generator(gen, output_signature=md.data.TensorSpec((), torch.int64))``.
        """
        from multidev.data.generator import GeneratorDataset

        return GeneratorDataset(generator, output_types, output_shapes, args, output_signature)

    @staticmethod
    def range(*args: int, output_type: torch.dtype = torch.int64, name: str | None = None,
              dtype: torch.dtype | None = None) -> "Dataset":
        """Like Python's ``range``, as int64 scalars: ``Dataset.range(2, 10, 3)`` -> 2, 5, 8.

        ``output_type`` is TensorFlow's keyword for another dtype (``dtype`` is accepted too).
        """
        from multidev.data.sources import RangeDataset

        return RangeDataset(*args, dtype=output_type if dtype is None else dtype)

    @staticmethod
    def zip(*datasets: Any, name: str | None = None) -> "Dataset":
        """Combine datasets element-wise: ``Dataset.zip((a, b))`` or ``Dataset.zip(a, b)``."""
        from multidev.data.combine import ZipDataset

        if len(datasets) == 1:
            datasets = datasets[0]
        return ZipDataset(datasets)

    @staticmethod
    def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None,
                   name: str | None = None) -> "Dataset":
        """File names matching a glob pattern (or list of patterns); shuffled unless shuffle=False."""
        from multidev.data.files import list_files

        return list_files(file_pattern, shuffle, seed)

    @staticmethod
    def from_torch(data: Any) -> "Dataset":
        """Wrap a ``torch.utils.data.Dataset`` (map-style or iterable) or a ``DataLoader``.

        Example: ``md.data.Dataset.from_torch(TensorDataset(x, y)).batch(32)``.
        """
        from multidev.data.torch_source import TorchDataset

        return TorchDataset(data)

    @staticmethod
    def counter(start: int = 0, step: int = 1, dtype: torch.dtype = torch.int64) -> "Dataset":
        """An infinite count ``start, start+step, ...``."""
        from multidev.data.sources import CounterDataset

        return CounterDataset(start, step, dtype)

    # ------------------------------------------------------------------ transformations

    def map(self, map_func: Callable, num_parallel_calls: int | None = None,
            deterministic: bool | None = None, name: str | None = None) -> "Dataset":
        """Apply ``map_func`` to each element (tuples unpacked as positional arguments).

        With ``num_parallel_calls`` > 1 or ``md.data.AUTOTUNE`` the calls run on background
        threads; output order is kept (``deterministic=False`` allows reordering in TF; multidev
        keeps the order anyway). Example: ``ds.map(lambda x, y: (x * 2, y))``.
        """
        from multidev.data.mapping import MapDataset

        return MapDataset(self, map_func, num_parallel_calls, deterministic)

    def filter(self, predicate: Callable, name: str | None = None) -> "Dataset":
        """Keep the elements for which ``predicate`` returns True (a bool or bool scalar)."""
        from multidev.data.mapping import FilterDataset

        return FilterDataset(self, predicate)

    def flat_map(self, map_func: Callable, name: str | None = None) -> "Dataset":
        """Map each element to a dataset and chain those datasets."""
        from multidev.data.mapping import FlatMapDataset

        return FlatMapDataset(self, map_func)

    def interleave(self, map_func: Callable, cycle_length: int | None = None, block_length: int | None = None,
                   num_parallel_calls: int | None = None, deterministic: bool | None = None,
                   name: str | None = None) -> "Dataset":
        """Map elements to datasets and interleave ``cycle_length`` of them, ``block_length`` at a time.

        Example: ``Dataset.list_files("*.txt").interleave(md.data.TextLineDataset, cycle_length=2)``.
        """
        from multidev.data.interleave import InterleaveDataset

        return InterleaveDataset(self, map_func, cycle_length, block_length, num_parallel_calls)

    def batch(self, batch_size: int, drop_remainder: bool = False, num_parallel_calls: int | None = None,
              deterministic: bool | None = None, name: str | None = None) -> "Dataset":
        """Stack ``batch_size`` consecutive elements; the last batch may be smaller.

        Example: ``Dataset.range(10).batch(4)`` -> [0..3], [4..7], [8, 9].
        """
        from multidev.data.batching import BatchDataset

        return BatchDataset(self, batch_size, drop_remainder, num_parallel_calls)

    def padded_batch(self, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False, name: str | None = None) -> "Dataset":
        """Batch elements of different shapes by padding each to the largest (or ``padded_shapes``)."""
        from multidev.data.batching import PaddedBatchDataset

        return PaddedBatchDataset(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self, name: str | None = None) -> "Dataset":
        """Split each batch into its rows: the inverse of ``batch``."""
        from multidev.data.batching import UnbatchDataset

        return UnbatchDataset(self)

    def rebatch(self, batch_size: Any, drop_remainder: bool = False, name: str | None = None) -> "Dataset":
        """Re-cut batches to ``batch_size`` (an int, or a list of sizes used in turn).

        Equivalent to ``unbatch().batch(batch_size)``; ``rebatch([2, 1])`` alternates sizes.
        """
        from multidev.data.batching import RebatchDataset

        return RebatchDataset(self, batch_size, drop_remainder)

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True,
                name: str | None = None) -> "Dataset":
        """Randomly shuffle with a buffer of ``buffer_size`` elements (reproducible under ``seed``).

        Use a buffer at least the dataset size for a uniform shuffle.
        """
        from multidev.data.shuffle import ShuffleDataset

        return ShuffleDataset(self, buffer_size, seed, reshuffle_each_iteration)

    def repeat(self, count: int | None = None, name: str | None = None) -> "Dataset":
        """Repeat the dataset ``count`` times (None or -1: forever), re-iterating the input."""
        from multidev.data.transforms import RepeatDataset

        return RepeatDataset(self, -1 if count is None else count)

    def take(self, count: int, name: str | None = None) -> "Dataset":
        """The first ``count`` elements (-1: all)."""
        from multidev.data.transforms import TakeDataset

        return TakeDataset(self, count)

    def skip(self, count: int, name: str | None = None) -> "Dataset":
        """All but the first ``count`` elements (-1: skip all)."""
        from multidev.data.transforms import SkipDataset

        return SkipDataset(self, count)

    def shard(self, num_shards: int, index: int, name: str | None = None) -> "Dataset":
        """Every ``num_shards``-th element starting at ``index``: ``range(10).shard(3, 1)`` -> 1, 4, 7."""
        from multidev.data.transforms import ShardDataset

        return ShardDataset(self, num_shards, index)

    def cache(self, filename: str = "", name: str | None = None) -> "Dataset":
        """Keep the elements in memory after the first full pass (or in ``filename``).

        With ``filename``, the elements go to ``filename + ".mdcache.safetensors"`` (safetensors and
        JSON, never pickle; written atomically, checksummed) keyed by a fingerprint of this pipeline:
        a later run of the same pipeline replays the file, another pipeline never does (it warns and
        rebuilds the file). Example: ``ds.map(parse).cache("/tmp/parsed")``.
        """
        from multidev.data.transforms import CacheDataset

        return CacheDataset(self, filename)

    def prefetch(self, buffer_size: int, name: str | None = None) -> "Dataset":
        """Produce up to ``buffer_size`` elements ahead on a background thread (AUTOTUNE ok)."""
        from multidev.data.prefetch import PrefetchDataset

        return PrefetchDataset(self, buffer_size)

    def enumerate(self, start: int = 0, name: str | None = None) -> "Dataset":
        """Pairs ``(index, element)``, counting from ``start``."""
        return Dataset.zip((Dataset.counter(start), self))

    def concatenate(self, dataset: "Dataset", name: str | None = None) -> "Dataset":
        """This dataset's elements followed by ``dataset``'s (same structure and dtypes)."""
        from multidev.data.combine import ConcatenateDataset

        return ConcatenateDataset(self, dataset)

    def with_options(self, options: Options, name: str | None = None) -> "Dataset":
        """The same dataset with ``options`` merged into its options."""
        from multidev.data.transforms import OptionsDataset

        return OptionsDataset(self, options)

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        """``transformation_func(self)``, for chaining custom transformations."""
        result = transformation_func(self)
        if not isinstance(result, Dataset):
            raise TypeError(f"apply: transformation_func must return a Dataset, got {type(result).__name__}.")
        return result

    def reduce(self, initial_state: Any, reduce_func: Callable) -> Any:
        """Fold the elements: ``state = reduce_func(state, element)``; the state keeps the structure
        of ``initial_state`` and the dtypes of its tensors (TypeError otherwise, as TF); a Python
        number's dtype follows the result (TF would raise TypeError for ``reduce(0, ...)`` of int64)."""
        from multidev.data.stateful import check_same_state, weak_leaves

        state, weak = structure.to_element(initial_state, "initial_state"), weak_leaves(initial_state)
        for element in self:
            state = check_same_state(state, structure.to_element(reduce_func(state, element), "reduce_func output"),
                                     "reduce_func", weak)
        return state


def _to_numpy(component: Any) -> Any:
    if isinstance(component, torch.Tensor):
        array = component.numpy(force=True)
        return array[()] if array.ndim == 0 else array  # scalars as numpy scalars, as TF
    if isinstance(component, str):
        return component.encode("utf-8")
    if isinstance(component, np.ndarray):
        return np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(np.asarray(component))
    return component


def spec_of_element(element: Any) -> Any:
    """The TensorSpec structure describing a concrete element."""
    return structure.map_structure(TensorSpec.from_value, element)


__all__ = ["Dataset", "AUTOTUNE", "spec_of_element"]
