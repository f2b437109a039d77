"""``Dataset.from_torch``: a ``torch.utils.data`` Dataset or DataLoader as an ``md.data.Dataset``."""

from __future__ import annotations

from typing import Any

import torch.utils.data as tud

from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data.dataset import Dataset, peeking, spec_of_element
from multidev.data.random_streams import streams_kept


def _element(sample: Any) -> Any:
    """torch samples/batches as elements: lists (default_collate's output) become tuples."""
    if isinstance(sample, list):
        sample = tuple(sample)
    if isinstance(sample, tuple):
        return tuple(_element(v) if isinstance(v, (list, tuple, dict)) else structure.to_component(v) for v in sample)
    if isinstance(sample, dict):
        return type(sample)((k, _element(v) if isinstance(v, (list, tuple, dict)) else structure.to_component(v))
                            for k, v in sample.items())
    return structure.to_component(sample, "torch sample")


class TorchDataset(Dataset):
    """Reads a map-style dataset by index, an iterable dataset or a DataLoader by iteration.

    A DataLoader yields whole batches (its own batching, shuffling and workers), so the
    md dataset's elements are those batches and its cardinality is ``len(loader)``.
    """

    def __init__(self, data: Any):
        if not isinstance(data, (tud.Dataset, tud.DataLoader)):
            raise TypeError(
                "Dataset.from_torch expects a torch.utils.data.Dataset or DataLoader, got "
                f"{type(data).__name__}. For tensors or numpy arrays use Dataset.from_tensor_slices."
            )
        self._data = data

    def _is_map_style(self) -> bool:
        return isinstance(self._data, tud.Dataset) and not isinstance(self._data, tud.IterableDataset)

    def _iterate(self):
        if self._is_map_style():
            for i in range(len(self._data)):
                yield _element(self._data[i])
            return
        for sample in self._data:
            yield _element(sample)

    def _cardinality(self) -> int:
        try:
            return len(self._data)
        except TypeError:
            return _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        with peeking(), streams_kept(self._data):   # as if never read: the draws stay the first pass's
            for element in self._iterate():
                return spec_of_element(element)
        raise ValueError("Cannot infer the element_spec of an empty torch dataset.")
