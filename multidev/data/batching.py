"""Batch-shaping transformations: ``batch``, ``padded_batch``, ``unbatch``, ``rebatch``.

``BatchDataset`` exposes ``batch_size`` and ``drop_remainder``: distributed input finds the
batch node with ``multidev.data.graph.find_batch`` to split global batches per replica.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from multidev._core.errors import DataLossError, FailedPreconditionError, InvalidArgumentError


class PaddingTooSmallError(DataLossError, InvalidArgumentError):
    """padded_shapes smaller than an element: TF 2.21 raises DataLossError, and earlier multidev
    (and the argument's nature) InvalidArgumentError; this is both, so either ``except`` catches it."""
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data._checks import as_int, parallelism, positive
from multidev.data.dataset import Dataset
from multidev.data.spec import TensorSpec
from multidev.data.inline import background
from multidev.data.transforms import _UnaryDataset


def _check_bool(name: str, value: Any) -> bool:
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.bool:
        return bool(value)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}.")
    return bool(value)


class BatchDataset(_UnaryDataset):
    """Groups of ``batch_size`` consecutive elements stacked into one element."""

    def __init__(self, input_dataset: Dataset, batch_size: int, drop_remainder: bool = False,
                 num_parallel_calls: Any = None):
        super().__init__(input_dataset)
        self._batch_size = positive("batch_size", batch_size)
        self._drop_remainder = _check_bool("drop_remainder", drop_remainder)
        self._num_parallel_calls = parallelism("num_parallel_calls", num_parallel_calls)

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def drop_remainder(self) -> bool:
        return self._drop_remainder

    def _batches(self):
        source = self._input._index_source()
        if source is not None:
            yield from self._gathered_batches(*source)
            return
        size, pending = self._batch_size, []
        for element in self._input._iterate():
            pending.append(element)
            if len(pending) == size:
                yield structure.batch_elements(pending)
                pending = []
        if pending and not self._drop_remainder:
            yield structure.batch_elements(pending)

    def _gathered_batches(self, make_indices, gather):
        """Batches of in-memory rows: collect row indices, then gather them in one op."""
        indices, size = make_indices(), self._batch_size
        while True:
            chunk = list(itertools.islice(indices, size))
            if not chunk or (len(chunk) < size and self._drop_remainder):
                return
            yield gather(chunk)

    def _iterate(self):
        if self._num_parallel_calls is None:
            yield from self._batches()
            return
        producer = background(self._batches, capacity=2, name="md.data.batch")
        try:
            yield from producer
        finally:
            producer.stop()

    def _cardinality(self) -> int:
        return _card.batched(self._input._cardinality(), self._batch_size, self._drop_remainder)

    def _compute_element_spec(self) -> Any:
        dim = self._batch_size if self._drop_remainder else None
        return structure.map_structure(lambda s: s.with_batch(dim), self._input.element_spec)


class PaddedBatchDataset(BatchDataset):
    """Like ``batch``, padding every component to a common (or given) shape first."""

    def __init__(self, input_dataset: Dataset, batch_size: int, padded_shapes: Any = None,
                 padding_values: Any = None, drop_remainder: bool = False):
        super().__init__(input_dataset, batch_size, drop_remainder)
        self._padded_shapes = padded_shapes
        self._padding_values = padding_values

    def _batches(self):
        for batch in self._batches_of_lists():
            yield self._pad(batch)

    def _batches_of_lists(self):
        size, pending = self._batch_size, []
        for element in self._input._iterate():
            pending.append(element)
            if len(pending) == size:
                yield pending
                pending = []
        if pending and not self._drop_remainder:
            yield pending

    def _pad(self, elements: list) -> Any:
        template = elements[0]
        flat = [structure.flatten(e) for e in elements]
        shapes = self._per_component(self._padded_shapes, template, "padded_shapes")
        values = self._per_component(self._padding_values, template, "padding_values")
        out = [_pad_component([f[i] for f in flat], shapes[i], values[i], i) for i in range(len(flat[0]))]
        return structure.pack_as(template, out)

    @staticmethod
    def _per_component(spec: Any, template: Any, what: str) -> list:
        count = len(structure.flatten(template))
        if spec is None:
            return [None] * count
        if not structure.is_structure(template):
            return [_Shape(spec) if what == "padded_shapes" else spec]
        if what == "padding_values":
            if not structure.is_structure(spec):
                return [spec] * count
            if structure.same_structure(spec, template):
                return structure.flatten(spec)
        elif structure.same_structure(_shape_leaves(spec), template):
            return structure.flatten(_shape_leaves(spec))
        raise ValueError(f"padded_batch: {what} {spec!r} does not match the element structure {template!r}.")

    def _compute_element_spec(self) -> Any:
        dim = self._batch_size if self._drop_remainder else None
        template = self._input.element_spec
        shapes = self._per_component(self._padded_shapes, template, "padded_shapes")
        leaves = structure.flatten(template)
        out = [_padded_spec(spec, shape).with_batch(dim) for spec, shape in zip(leaves, shapes)]
        return structure.pack_as(template, out)


def _shape_leaves(spec: Any) -> Any:
    """Treat lists/``torch.Size`` in padded_shapes as shapes (leaves), tuples of shapes as structure."""
    if isinstance(spec, dict):
        return {k: _shape_leaves(v) for k, v in spec.items()}
    if isinstance(spec, tuple) and not all(d is None or isinstance(d, int) for d in spec):
        return tuple(_shape_leaves(v) for v in spec)
    return _Shape(spec)


class _Shape:
    __slots__ = ("dims",)

    def __init__(self, dims: Any):
        self.dims = None if dims is None else tuple(None if d is None or d < 0 else int(d) for d in dims)


def _padded_spec(spec: TensorSpec, shape: Any) -> TensorSpec:
    dims = shape.dims if isinstance(shape, _Shape) else None
    if dims is None:
        return spec
    return TensorSpec(dims, spec.dtype, spec.name)


def _pad_component(parts: list, shape: Any, value: Any, index: int) -> Any:
    if not isinstance(parts[0], torch.Tensor):
        return structure.stack_components(parts, index)
    ranks = {p.dim() for p in parts}
    if len(ranks) > 1:
        raise InvalidArgumentError(f"padded_batch: component {index} has elements of different ranks {sorted(ranks)}.")
    target = [max(p.shape[d] for p in parts) for d in range(parts[0].dim())]
    dims = shape.dims if isinstance(shape, _Shape) else None
    if dims is not None:
        if len(dims) != len(target):
            raise ValueError(f"padded_batch: padded shape {dims} has rank {len(dims)} but component {index} has rank {len(target)}.")
        for d, want in enumerate(dims):
            if want is not None:
                if target[d] > want:
                    raise PaddingTooSmallError(
                        f"Attempted to pad to a smaller size than the input element: component {index} "
                        f"dimension {d} has size {target[d]} but padded_shapes asks for {want}."
                    )
                target[d] = want
    fill = 0 if value is None else (value.item() if isinstance(value, torch.Tensor) else value)
    out = torch.full([len(parts)] + target, fill, dtype=parts[0].dtype)
    for i, p in enumerate(parts):
        out[(i,) + tuple(slice(0, n) for n in p.shape)] = p
    return out


def _has_scalar_component(dataset: Dataset) -> bool:
    """True when the element spec (if it can be known without data) has a rank-0 component."""
    try:
        leaves = structure.flatten(dataset.element_spec)
    except (ValueError, TypeError):   # an empty input (or one whose spec needs its data): nothing to check
        return False
    return any(isinstance(leaf, TensorSpec) and leaf.shape == () for leaf in leaves)


class UnbatchDataset(_UnaryDataset):
    """Each batch split into its rows."""

    def __init__(self, input_dataset: Dataset):
        super().__init__(input_dataset)
        if _has_scalar_component(input_dataset):
            raise ValueError("Cannot unbatch an input with scalar components: unbatch splits batches "
                             f"(rank >= 1), and this dataset's elements are {input_dataset.element_spec!r}.")

    def _iterate(self):
        for batch in self._input._iterate():
            flat = structure.flatten(batch)
            sizes = {structure.leading_dim(c) for c in flat}
            if len(sizes) > 1:
                raise InvalidArgumentError(f"unbatch: components have different batch sizes {sorted(sizes)}.")
            for i in range(sizes.pop()):
                yield structure.pack_as(batch, [c[i] for c in flat])

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        source = self._input
        if _card.known(n) and isinstance(source, BatchDataset) and source.drop_remainder:
            return n * source.batch_size   # TF: batches of a static size unbatch into a known count
        return n if n in (0, _card.INFINITE_CARDINALITY) else _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        def row(spec: TensorSpec) -> TensorSpec:
            if spec.shape is not None and len(spec.shape) == 0:
                raise ValueError("Cannot unbatch an input with scalar components: elements need a batch dimension.")
            return spec.unbatched()

        return structure.map_structure(row, self._input.element_spec)


class RebatchDataset(_UnaryDataset):
    """Batches re-cut to ``batch_size`` (int, or list of sizes cycled), like ``unbatch().batch()``."""

    def __init__(self, input_dataset: Dataset, batch_size: Any, drop_remainder: bool = False):
        super().__init__(input_dataset)
        sizes = list(batch_size) if isinstance(batch_size, (list, tuple)) else [batch_size]
        self._sizes = [as_int("batch_size", s) for s in sizes]
        if not self._sizes or any(s < 0 for s in self._sizes) or not any(self._sizes):
            raise InvalidArgumentError(
                f"rebatch batch_size must be a positive int or a list of non-negative ints with at least one "
                f"positive, got batch_size={batch_size!r}."
            )
        self._drop_remainder = _check_bool("drop_remainder", drop_remainder)
        if _has_scalar_component(input_dataset):
            raise ValueError("Invalid `batch_sizes`. Expected dataset with rank of >= 1 but found a dataset with "
                             "scalar elements. Fix the issue by adding the `batch` transformation to the dataset.")

    @property
    def batch_sizes(self) -> list[int]:
        return list(self._sizes)

    def _iterate(self):
        sizes = itertools.cycle(self._sizes)
        target, pending, have, template = next(sizes), [], 0, None
        for batch in self._input._iterate():
            template, flat = batch, structure.flatten(batch)
            n, offset = structure.leading_dim(flat[0]), 0
            while True:
                take = min(target - have, n - offset)
                if take > 0:
                    pending.append([c[offset:offset + take] for c in flat])
                    have, offset = have + take, offset + take
                if have < target:
                    break
                parts = pending or [[c[offset:offset] for c in flat]]
                yield structure.pack_as(template, _concat(parts))
                target, pending, have = next(sizes), [], 0
        if have and not self._drop_remainder:
            yield structure.pack_as(template, _concat(pending))

    def _cardinality(self) -> int:
        n = self._input._cardinality()
        return n if n in (0, _card.INFINITE_CARDINALITY) else _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        fixed = len(set(self._sizes)) == 1 and self._drop_remainder
        dim = self._sizes[0] if fixed else None
        return structure.map_structure(lambda s: s.unbatched().with_batch(dim), self._input.element_spec)


def _concat(parts: list) -> list:
    if len(parts) == 1:
        return parts[0]
    for i in range(len(parts[0])):
        shapes = [list(p[i].shape) for p in parts]
        if len({tuple(shape[1:]) for shape in shapes}) > 1:   # TF: FailedPreconditionError, naming no cause
            raise FailedPreconditionError(
                f"rebatch joins the rows of consecutive batches into one, and these differ beyond dimension 0 "
                f"(shapes {shapes}, e.g. padded_batch padding each batch to its longest element). Distributed "
                "input does this too on one worker with auto-sharding OFF, FILE or HINT (a partial batch's rows "
                "are followed by the next batch's, as in TensorFlow). Pad to fixed padded_shapes, batch with "
                "drop_remainder=True, or use AutoShardPolicy.AUTO/DATA.")
    return [structure.concat_components([p[i] for p in parts]) for i in range(len(parts[0]))]
