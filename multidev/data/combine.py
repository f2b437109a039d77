"""Multi-input datasets: ``zip`` and ``concatenate``."""

from __future__ import annotations

from typing import Any

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data.dataset import Dataset


class ZippedTuple(tuple):
    """An element of ``Dataset.zip((a, b))`` whose items differ in dimension 0 (datasets batched to 16 and 4): a
    tuple that remembers its items came from separate datasets, so distributing it cuts each item along its own
    dimension 0, as TensorFlow does. A plain tuple otherwise (``map`` and other rebuilding drop the mark, and a
    zip of items of one size yields plain tuples)."""


class ZippedDict(dict):
    """An element of ``Dataset.zip({'a': a, 'b': b})``: as ``ZippedTuple``, for a dict of datasets."""


def unmarked(element: Any) -> Any:
    """``element`` with its zip marks dropped (plain tuples and dicts), for libraries that treat a tuple
    subclass as a leaf (Keras 3's tree)."""
    if isinstance(element, ZippedTuple):
        return tuple(unmarked(e) for e in element)
    if isinstance(element, ZippedDict):
        return {k: unmarked(v) for k, v in element.items()}
    return element


def _rows_differ(items: list) -> bool:
    rows = {leaf.shape[0] for item in items for leaf in structure.flatten(item)
            if isinstance(leaf, torch.Tensor) and leaf.dim() > 0}
    return len(rows) > 1


def _register_with_torch_pytree() -> None:
    """torch's tree utilities (``tree_map``, ``torch.compile``'s inputs) walk a marked element as a tuple/dict."""
    from torch.utils import _pytree
    _pytree.register_pytree_node(ZippedTuple, lambda t: (list(t), None), lambda values, _: ZippedTuple(values))
    _pytree.register_pytree_node(ZippedDict, lambda d: (list(d.values()), list(d)),
                                 lambda values, keys: ZippedDict(zip(keys, values)))


_register_with_torch_pytree()


def _zipped(nest: Any, items: list) -> Any:
    """``structure`` (the zip's nest of datasets) packed with one element of each, every level marked."""
    it = iter(items)

    def pack(node: Any) -> Any:
        if isinstance(node, tuple):   # a namedtuple keeps its type, unmarked
            items = [pack(n) for n in node]
            return type(node)(*items) if hasattr(node, "_fields") else ZippedTuple(items)
        if isinstance(node, dict):
            packed = {key: pack(node[key]) for key in structure.sorted_keys(node)}
            return ZippedDict((key, packed[key]) for key in node)
        return next(it)
    return pack(nest)


class ZipDataset(Dataset):
    """Elements of several datasets combined in the structure the datasets were given in."""

    def __init__(self, datasets: Any):
        if isinstance(datasets, list):
            datasets = tuple(datasets)
        leaves = structure.flatten(datasets)
        if not leaves:
            raise InvalidArgumentError(f"Dataset.zip needs at least one dataset, got {datasets!r}: pass a "
                                       "tuple or dict of md.data.Dataset, e.g. Dataset.zip((a, b)).")
        for i, leaf in enumerate(leaves):
            if not isinstance(leaf, Dataset):
                raise TypeError(
                    f"Dataset.zip expects a (nested) tuple/dict of md.data.Dataset, but argument {i} is "
                    f"{leaf!r} of type {type(leaf).__name__}."
                )
        self._structure = datasets
        self._inputs = tuple(leaves)

    def _iterate(self):
        sources = [d._iterate() for d in self._inputs]
        try:
            while True:
                items = []
                for source in sources:
                    try:
                        items.append(next(source))
                    except StopIteration:
                        return
                yield (_zipped(self._structure, items) if _rows_differ(items)
                       else structure.pack_as(self._structure, items))
        finally:
            for source in sources:
                source.close()

    def _cardinality(self) -> int:
        return _card.zipped([d._cardinality() for d in self._inputs])

    def _compute_element_spec(self) -> Any:
        return structure.pack_as(self._structure, [d.element_spec for d in self._inputs])


class ConcatenateDataset(Dataset):
    """All elements of the first dataset, then all of the second."""

    def __init__(self, first: Dataset, second: Dataset):
        if not isinstance(second, Dataset):
            raise TypeError(f"concatenate expects a md.data.Dataset, got {type(second).__name__}.")
        self._inputs = (first, second)
        self._check_compatible()

    def _check_compatible(self) -> None:
        a, b = (d.element_spec for d in self._inputs)
        compatible = structure.same_structure(a, b) and all(
            x.dtype == y.dtype for x, y in zip(structure.flatten(a), structure.flatten(b))
        )
        if not compatible:
            raise TypeError(f"Incompatible dataset elements for concatenate:\n  {a}\nvs.\n  {b}")

    def _iterate(self):
        for dataset in self._inputs:
            yield from dataset._iterate()

    def _cardinality(self) -> int:
        return _card.concatenated(*(d._cardinality() for d in self._inputs))

    def _compute_element_spec(self) -> Any:
        a, b = (d.element_spec for d in self._inputs)
        return structure.pack_as(
            a, [x.most_specific_common_supertype(y) for x, y in zip(structure.flatten(a), structure.flatten(b))]
        )
