"""``interleave``: round-robin over datasets made from input elements (TF's output order)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from multidev.data import cardinality as _card
from multidev.data._checks import callable_arg, parallelism, positive
from multidev.data.dataset import Dataset
from multidev.data.mapping import call_unpacked
from multidev.data.inline import background
from multidev.data.transforms import _UnaryDataset


def default_cycle_length() -> int:
    """TF's default ``cycle_length`` (AUTOTUNE): the number of CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


def interleave_iterators(iterators: Iterator[Iterator], cycle_length: int, block_length: int = 1) -> Iterator:
    """TF's sequential interleave order over ``cycle_length`` slots, ``block_length`` items per turn.

    An empty slot is filled from ``iterators`` when the cycle reaches it; an exhausted
    iterator empties its slot and the cycle moves on.
    """
    slots: list = [None] * cycle_length
    index = block = opened = 0
    end_of_input = False
    while not end_of_input or opened:
        current = slots[index]
        if current is not None:
            item = next(current, _END)
            if item is not _END:
                block += 1
                if block == block_length:
                    block, index = 0, (index + 1) % cycle_length
                yield item
                continue
            slots[index], opened = None, opened - 1
            block, index = 0, (index + 1) % cycle_length
        elif not end_of_input:
            fresh = next(iterators, None)
            if fresh is None:
                end_of_input = True
            else:
                slots[index], opened = fresh, opened + 1
        else:
            block, index = 0, (index + 1) % cycle_length


_END = object()


class InterleaveDataset(_UnaryDataset):
    """Maps each element to a dataset and interleaves ``cycle_length`` of them at a time.

    Example: ``files.interleave(md.data.TextLineDataset, cycle_length=4)`` reads 4 files
    line by line in turn. With ``num_parallel_calls`` the interleaved stream is produced on
    a background thread (same order).
    """

    def __init__(self, input_dataset: Dataset, map_func: Callable, cycle_length: Any = None, block_length: Any = None,
                 num_parallel_calls: Any = None):
        super().__init__(input_dataset)
        self._fn = callable_arg("map_func", map_func)
        cycle = None if cycle_length in (None, -1) else positive("cycle_length", cycle_length)
        self._cycle = cycle
        self._block = 1 if block_length in (None, -1) else positive("block_length", block_length)
        self._parallel = parallelism("num_parallel_calls", num_parallel_calls)

    @property
    def map_func(self) -> Callable:
        return self._fn

    def _datasets(self) -> Iterator[Iterator]:
        for element in self._input._iterate():
            result = call_unpacked(self._fn, element)
            if not isinstance(result, Dataset):
                raise TypeError(f"interleave's map_func must return a md.data.Dataset, got {type(result).__name__}.")
            yield result._iterate()

    def _interleaved(self) -> Iterator:
        cycle = self._cycle or default_cycle_length()
        return interleave_iterators(self._datasets(), cycle, self._block)

    def _iterate(self):
        if self._parallel is None:
            yield from self._interleaved()
            return
        producer = background(self._interleaved, capacity=8, name="md.data.interleave")
        try:
            yield from producer
        finally:
            producer.stop()

    def _cardinality(self) -> int:
        return 0 if self._input._cardinality() == 0 else _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        from multidev.data.dataset import peeking

        with peeking():
            for element in self._input._iterate():
                return call_unpacked(self._fn, element).element_spec
        raise ValueError("Cannot infer interleave's element_spec: its input is empty.")
