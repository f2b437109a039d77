"""Datasets of datasets: ``window``, ``group_by_window`` and ``bucket_by_sequence_length`` (tf.data's
windowing and bucketing; each window is a small in-memory dataset of the elements it holds)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev._core.errors import ArgumentTypeError, InvalidArgumentError
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data._checks import as_int, callable_arg, positive
from multidev.data.batching import _Shape, _shape_leaves
from multidev.data.dataset import Dataset
from multidev.data.mapping import call_unpacked
from multidev.data.spec import TensorSpec
from multidev.data.transforms import _UnaryDataset


class DatasetSpec:
    """The spec of an element that is itself a dataset (``tf.data.DatasetSpec``): what ``window``'s
    elements are made of. ``element_spec`` is the inner dataset's element spec."""

    __slots__ = ("_element_spec",)

    def __init__(self, element_spec: Any, dataset_shape: Any = ()):
        self._element_spec = element_spec

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetSpec) and self._element_spec == other._element_spec

    def __hash__(self) -> int:
        return hash(repr(self._element_spec))

    def __repr__(self) -> str:
        return f"DatasetSpec({self._element_spec!r}, dataset_shape=())"


class ListDataset(Dataset):
    """The elements of a Python list, in order (one window's or one group's contents)."""

    def __init__(self, elements: list, element_spec: Any):
        self._elements = elements
        self._spec = element_spec

    def _iterate(self):
        yield from self._elements

    def _cardinality(self) -> int:
        return len(self._elements)

    def _compute_element_spec(self) -> Any:
        return self._spec


class WindowDataset(_UnaryDataset):
    """Windows of ``size`` elements, ``stride`` apart, starting every ``shift`` elements; each
    element is the input's structure with a dataset in place of every component."""

    def __init__(self, input_dataset: Dataset, size: Any, shift: Any = None, stride: Any = 1,
                 drop_remainder: bool = False):
        super().__init__(input_dataset)
        self._size = positive("size", size)
        self._shift = self._size if shift is None else positive("shift", shift)
        self._stride = positive("stride", stride)
        self._drop_remainder = bool(drop_remainder)

    def _windows(self):
        """Lists of elements, one per window (TF's rule: a window that would be empty ends the data)."""
        source = self._input._iterate()
        buffer: list = []
        span = (self._size - 1) * self._stride + 1
        exhausted = False
        try:
            while True:
                while not exhausted and len(buffer) < span:
                    try:
                        buffer.append(next(source))
                    except StopIteration:
                        exhausted = True
                window = buffer[:span:self._stride]
                if not window or (self._drop_remainder and len(window) < self._size):
                    return
                yield window
                to_drop = self._shift - len(buffer)
                del buffer[:self._shift]
                while to_drop > 0 and not exhausted:   # a shift past the buffer skips input elements
                    try:
                        next(source)
                        to_drop -= 1
                    except StopIteration:
                        exhausted = True
        finally:
            source.close()

    def _iterate(self):
        leaf_specs = structure.flatten(self._input.element_spec)
        for window in self._windows():
            columns = list(zip(*(structure.flatten(e) for e in window)))
            yield structure.pack_as(self._input.element_spec,
                                    [ListDataset(list(c), s) for c, s in zip(columns, leaf_specs)])

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        if not _card.known(n):
            return n
        if self._drop_remainder:
            rest = n - ((self._size - 1) * self._stride + 1)
            return 0 if rest < 0 else rest // self._shift + 1
        return n // self._shift + (1 if n % self._shift else 0)

    def _compute_element_spec(self) -> Any:
        return structure.map_structure(DatasetSpec, self._input.element_spec)


class GroupByWindowDataset(_UnaryDataset):
    """``group_by_window``: elements grouped by ``key_func``; a group that reaches its window size
    (and, at the end, every non-empty group, in key order as TF) goes through ``reduce_func``."""

    def __init__(self, input_dataset: Dataset, key_func: Callable, reduce_func: Callable,
                 window_size: Any = None, window_size_func: Callable | None = None,
                 spec_fn: Callable[[Any], Any] | None = None):
        super().__init__(input_dataset)
        self._spec_fn = spec_fn or (lambda spec: spec)   # bucketing widens the first window's spec
        if (window_size is None) == (window_size_func is None):
            raise ValueError("Either the `window_size` argument or the `window_size_func` argument must be "
                             f"specified (exactly one), got window_size={window_size!r}, "
                             f"window_size_func={window_size_func!r}.")
        if window_size is not None:
            size = positive("window_size", window_size)
            window_size_func = lambda key: size  # noqa: E731
        self._key_func = callable_arg("key_func", key_func)
        self._reduce_func = callable_arg("reduce_func", reduce_func)
        self._size_func = callable_arg("window_size_func", window_size_func)

    def _key(self, element: Any) -> int:
        key = call_unpacked(self._key_func, element)
        try:
            return as_int("key_func's result", key)
        except TypeError:
            raise ArgumentTypeError(f"`key_func` must return a single int64 scalar tensor, got {key!r}.") from None

    def _reduce(self, key: int, elements: list) -> Dataset:
        result = self._reduce_func(torch.tensor(key, dtype=torch.int64),
                                   ListDataset(elements, self._input.element_spec))
        if not isinstance(result, Dataset):
            raise TypeError(f"`reduce_func` must return a md.data.Dataset, got {type(result).__name__}.")
        return result

    def _window_size(self, key: int) -> int:
        size = as_int("window_size_func's result", self._size_func(torch.tensor(key, dtype=torch.int64)))
        if size <= 0:
            raise InvalidArgumentError(f"Window size must be greater than zero, but got {size}.")
        return size

    def _iterate(self):
        groups: dict[int, list] = {}
        for element in self._input._iterate():
            key = self._key(element)
            group = groups.setdefault(key, [])
            group.append(element)
            if len(group) >= self._window_size(key):
                del groups[key]
                yield from self._reduce(key, group)._iterate()
        for key in sorted(groups):
            yield from self._reduce(key, groups[key])._iterate()

    def _cardinality(self) -> int:
        return _card.INFINITE_CARDINALITY if self._input._cardinality() == _card.INFINITE_CARDINALITY \
            else _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        for element in self._input._iterate():
            return self._spec_fn(self._reduce(self._key(element), [element]).element_spec)
        raise ValueError("Cannot infer group_by_window's element_spec: its input is empty.")


def bucket_by_sequence_length(dataset: Dataset, element_length_func: Callable, bucket_boundaries: list,
                              bucket_batch_sizes: list, padded_shapes: Any = None, padding_values: Any = None,
                              pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                              drop_remainder: bool = False) -> Dataset:
    """TF's recipe: a bucket per length range ``[b_i, b_{i+1})``, ``group_by_window`` by bucket, each
    bucket's windows padded (``padded_batch``) to their longest element, or to the bucket's boundary
    minus one with ``pad_to_bucket_boundary`` (then every length must be below the last boundary)."""
    boundaries = [as_int("bucket_boundaries entry", b) for b in bucket_boundaries]
    sizes = [positive("bucket_batch_sizes entry", b) for b in bucket_batch_sizes]
    if len(sizes) != len(boundaries) + 1:
        raise ValueError(f"len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1, got "
                         f"bucket_batch_sizes={list(bucket_batch_sizes)!r} and "
                         f"bucket_boundaries={list(bucket_boundaries)!r}.")
    if any(a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError(f"bucket_boundaries must be sorted in increasing order, got {boundaries!r}.")

    def bucket_id(*args: Any) -> int:
        length = as_int("element_length_func's result", element_length_func(*args))
        return sum(1 for b in boundaries if length >= b)

    def batching(key: torch.Tensor, group: Dataset) -> Dataset:
        bucket, size = int(key), sizes[int(key)]
        if no_padding:
            return group.batch(size, drop_remainder=drop_remainder)
        shapes = padded_shapes
        if pad_to_bucket_boundary:
            if bucket >= len(boundaries):
                raise InvalidArgumentError("When pad_to_bucket_boundary=True, elements must have length < "
                                           f"max(bucket_boundaries) = {boundaries[-1]}; pass a larger last "
                                           "boundary or filter out longer elements.")
            shapes = _filled_shapes(padded_shapes or group.element_spec, boundaries[bucket] - 1)
        return group.padded_batch(size, shapes, padding_values, drop_remainder=drop_remainder)

    def widened(spec: Any) -> Any:
        """TF's spec: the batch size (and a length padded to the bucket's boundary) varies by bucket."""
        def leaf(batch_spec: TensorSpec, element_spec: TensorSpec) -> TensorSpec:
            if batch_spec.shape is None:
                return batch_spec
            rows = batch_spec.shape[1:]
            if pad_to_bucket_boundary and padded_shapes is None and element_spec.shape is not None:
                rows = tuple(None if e is None else d for d, e in zip(rows, element_spec.shape))
            return TensorSpec((None,) + rows, batch_spec.dtype, batch_spec.name)
        return structure.map_structure(leaf, spec, dataset.element_spec)

    return GroupByWindowDataset(dataset, lambda *args: bucket_id(*args), batching,
                                window_size_func=lambda key: sizes[int(key)], spec_fn=widened)


def _filled_shapes(shapes: Any, filler: int) -> Any:
    """``shapes`` (an element spec, or padded_shapes as given) with every unknown dimension set to
    ``filler``, as lists ``padded_batch`` reads as shapes."""
    def fill(leaf: Any) -> Any:
        dims = leaf.dims if isinstance(leaf, _Shape) else leaf.shape
        return None if dims is None else [filler if d is None else d for d in dims]
    leaves = shapes if structure.flatten(shapes) and all(isinstance(x, TensorSpec) for x in structure.flatten(shapes)) \
        else _shape_leaves(shapes)
    return structure.map_structure(fill, leaves)
