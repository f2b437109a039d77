"""Source datasets built from in-memory values: tensor slices, one tensor, ranges, counters."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from multidev._core.errors import InvalidArgumentError
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data._checks import as_int
from multidev.data.dataset import Dataset, spec_of_element
from multidev.data.spec import TensorSpec, common_shape


class TensorSliceDataset(Dataset):
    """Rows of tensors/arrays/lists (nested in tuples/dicts), one element per row.

    A numpy object array of sequences (e.g. token lists of different lengths) gives
    variable-length 1-D elements, which ``padded_batch`` can batch; a ragged Python list is
    rejected with ValueError, as in TensorFlow.
    """

    def __init__(self, tensors: Any):
        self._structure = tensors
        flat = structure.flatten(tensors)
        if not flat:
            raise ValueError(
                f"Dataset.from_tensor_slices: {tensors!r} has no components to slice (an empty structure); "
                "pass at least one tensor, e.g. from_tensor_slices({'x': [1, 2]})."
            )
        leaves = [_slice_source(leaf, i) for i, leaf in enumerate(flat)]
        self._leaves = leaves
        self._length = _common_length(leaves, tensors)

    def _iterate(self):
        leaves, template = self._leaves, self._structure
        if not structure.is_structure(template):
            leaf = leaves[0]
            for i in range(self._length):
                yield leaf[i]
            return
        for i in range(self._length):
            yield structure.pack_as(template, [leaf[i] for leaf in leaves])

    def _cardinality(self) -> int:
        return self._length

    def _compute_element_spec(self) -> Any:
        return structure.pack_as(self._structure, [_row_spec(leaf) for leaf in self._leaves])

    def _index_source(self):
        if any(isinstance(leaf, _Ragged) for leaf in self._leaves):
            return None
        return (lambda: iter(range(self._length))), self._gather

    def _gather(self, indices: list) -> Any:
        """The batch of rows ``indices`` in one indexing op per component."""
        rows = [
            leaf.index_select(0, torch.tensor(indices)) if isinstance(leaf, torch.Tensor) else leaf[np.array(indices)]
            for leaf in self._leaves
        ]
        return structure.pack_as(self._structure, rows) if structure.is_structure(self._structure) else rows[0]


class TensorDataset(Dataset):
    """Exactly one element."""

    def __init__(self, tensors: Any):
        self._element = structure.to_element(tensors, "tensors")

    def _iterate(self):
        yield self._element

    def _cardinality(self) -> int:
        return 1

    def _compute_element_spec(self) -> Any:
        return spec_of_element(self._element)


class RangeDataset(Dataset):
    """``range(start, stop, step)`` as scalar tensors (int64 by default)."""

    def __init__(self, *args: Any, dtype: torch.dtype = torch.int64):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"Dataset.range takes 1 to 3 arguments (start, stop, step), got {len(args)}: {args!r}.")
        ints = [as_int("Dataset.range argument", a) for a in args]
        if len(ints) == 3 and ints[2] == 0:
            raise InvalidArgumentError("Dataset.range step must be a non-zero integer, got step=0.")
        self._range = range(*ints)
        self._dtype = dtype

    def _iterate(self):
        dtype = self._dtype
        for i in self._range:
            yield torch.tensor(i, dtype=dtype)

    def _cardinality(self) -> int:
        return len(self._range)

    def _compute_element_spec(self) -> Any:
        return TensorSpec((), self._dtype)


class CounterDataset(Dataset):
    """An infinite count ``start, start + step, ...`` (``enumerate`` zips one in)."""

    def __init__(self, start: int, step: int, dtype: torch.dtype):
        self._start = as_int("start", start)
        self._step = as_int("step", step)
        self._dtype = dtype

    def _iterate(self):
        for i in itertools.count(self._start, self._step):
            yield torch.tensor(i, dtype=self._dtype)

    def _cardinality(self) -> int:
        return _card.INFINITE_CARDINALITY

    def _compute_element_spec(self) -> Any:
        return TensorSpec((), self._dtype)


# ---------------------------------------------------------------- helpers


class _Ragged:
    """Rows of different lengths, each already a tensor."""

    __slots__ = ("rows",)

    def __init__(self, rows: list):
        self.rows = rows

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.rows[i]

    def __len__(self) -> int:
        return len(self.rows)


def _slice_source(leaf: Any, index: int) -> Any:
    what = f"component {index} of from_tensor_slices"
    if isinstance(leaf, np.ndarray) and leaf.dtype == object and leaf.ndim == 1 and _all_sequences(leaf):
        rows = [structure.to_component(_as_list(row), f"row {i} of {what}") for i, row in enumerate(leaf)]
        dtype = next((r.dtype for r in rows if r.numel() > 0), rows[0].dtype)
        return _Ragged([r.to(dtype) for r in rows])
    component = structure.to_component(leaf, what)
    if isinstance(component, str) or (isinstance(component, torch.Tensor) and component.dim() == 0) or (
        isinstance(component, np.ndarray) and component.ndim == 0
    ):
        raise ValueError(
            f"Cannot slice {what}: {leaf!r} is a scalar (rank 0); from_tensor_slices needs rank >= 1. "
            "Use Dataset.from_tensors for a single element."
        )
    return component


def _all_sequences(array: np.ndarray) -> bool:
    return len(array) > 0 and all(isinstance(row, (list, tuple, np.ndarray, torch.Tensor)) for row in array)


def _as_list(row: Any) -> Any:
    return list(row) if isinstance(row, tuple) else row


def _common_length(leaves: list, tensors: Any) -> int:
    lengths = [len(leaf) for leaf in leaves]
    if len(set(lengths)) > 1:
        described = ", ".join(f"component {i}: {n}" for i, n in enumerate(lengths))
        raise ValueError(
            "from_tensor_slices needs every component to have the same size in dimension 0, "
            f"got {described}. Dimensions {lengths[0]} and {next(n for n in lengths if n != lengths[0])} "
            "are not compatible."
        )
    return lengths[0]


def _row_spec(leaf: Any) -> TensorSpec:
    if isinstance(leaf, _Ragged):
        shapes = [tuple(r.shape) for r in leaf.rows]
        shape = shapes[0]
        for s in shapes[1:]:
            shape = common_shape(shape, s)
        return TensorSpec(shape, leaf.rows[0].dtype)
    if isinstance(leaf, torch.Tensor):
        return TensorSpec(tuple(leaf.shape[1:]), leaf.dtype)
    return TensorSpec(leaf.shape[1:], str)
