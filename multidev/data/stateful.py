"""Transformations that carry state across elements or datasets: ``scan``, ``take_while``,
``unique``, ``assert_cardinality``, ``choose_from_datasets``/``sample_from_datasets`` and
``get_single_element`` (TensorFlow's exception types and messages)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from multidev._core.errors import FailedPreconditionError, InvalidArgumentError
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data._checks import as_int, callable_arg
from multidev.data.dataset import Dataset, is_peeking
from multidev.data.mapping import _as_bool, _spec_from_first, call_unpacked, normalize_output
from multidev.data.transforms import _UnaryDataset


def weak_leaves(initial_state: Any) -> list:
    """Which leaves of ``initial_state`` are Python numbers: their dtype follows the fold's result
    (TensorFlow fixes them at int32/float32 and raises TypeError when the result differs)."""
    return [isinstance(leaf, (int, float)) and not isinstance(leaf, bool) for leaf in structure.flatten(initial_state)]


def check_same_state(old: Any, new: Any, what: str, weak: list) -> Any:
    """``new`` if it has ``old``'s structure and, except at ``weak`` leaves, its dtypes (as in TF)."""
    if not structure.same_structure(old, new):
        raise InvalidArgumentError(f"The number of components of the initial state and the {what} output does not "
                                   f"match: initial state {old!r}, {what} returned {new!r}.")
    for a, b, is_weak in zip(structure.flatten(old), structure.flatten(new), weak):
        if not is_weak and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype != b.dtype:
            raise TypeError(f"The element types for the new state must match the initial state: {what} returned "
                            f"{b.dtype} where the initial state has {a.dtype}. Give the initial state the dtype "
                            f"of the result, e.g. md.constant(0, {str(b.dtype).replace('torch.', 'md.')}).")
    return new


class ScanDataset(_UnaryDataset):
    """``scan_func(state, element) -> (new_state, output)`` over the elements, from ``initial_state``."""

    def __init__(self, input_dataset: Dataset, initial_state: Any, scan_func: Callable):
        super().__init__(input_dataset)
        self._initial = structure.to_element(initial_state, "initial_state")
        self._weak = weak_leaves(initial_state)
        self._fn = callable_arg("scan_func", scan_func)

    def _iterate(self):
        state = self._initial
        for element in self._input._iterate():
            result = self._fn(state, element)
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TypeError(f"scan_func must return a pair (new_state, output_element), got {result!r}.")
            state = check_same_state(state, structure.to_element(result[0], "scan_func's new state"), "scan_func",
                                     self._weak)
            yield normalize_output(result[1])

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _compute_element_spec(self) -> Any:
        return _spec_from_first(self, "scan")


class TakeWhileDataset(_UnaryDataset):
    """The elements up to (not including) the first one for which ``predicate`` is False."""

    def __init__(self, input_dataset: Dataset, predicate: Callable):
        super().__init__(input_dataset)
        self._predicate = callable_arg("predicate", predicate)

    def _iterate(self):
        for element in self._input._iterate():
            if not _as_bool(call_unpacked(self._predicate, element)):
                return
            yield element

    def _cardinality(self) -> int:
        return _card.UNKNOWN_CARDINALITY


class UniqueDataset(_UnaryDataset):
    """Each distinct element once, in order of first appearance (int32/int64/string scalars)."""

    def __init__(self, input_dataset: Dataset):
        super().__init__(input_dataset)
        spec = input_dataset.element_spec
        if structure.is_structure(spec) or spec.dtype not in (torch.int32, torch.int64, str):
            raise TypeError(f"`md.data.Dataset.unique` does not support type {spec!r} -- only scalar `int32`, "
                            "`int64`, and string elements are supported.")

    def _iterate(self):
        seen: set = set()
        for element in self._input._iterate():
            key = element.item() if isinstance(element, torch.Tensor) else element
            if key not in seen:
                seen.add(key)
                yield element

    def _cardinality(self) -> int:
        return _card.UNKNOWN_CARDINALITY


class AssertCardinalityDataset(_UnaryDataset):
    """The input, declared to hold ``expected`` elements; iterating checks it (FailedPreconditionError)."""

    def __init__(self, input_dataset: Dataset, expected: Any):
        super().__init__(input_dataset)
        self._expected = as_int("expected_cardinality", expected)

    def _iterate(self):
        count = 0
        for element in self._input._iterate():
            count += 1
            if self._expected >= 0 and count > self._expected:
                raise FailedPreconditionError(f"Input dataset was expected to contain {self._expected} elements but "
                                              f"contained at least {count} elements.")
            yield element
        if count < self._expected or self._expected == _card.INFINITE_CARDINALITY:
            raise FailedPreconditionError(f"Input dataset was expected to contain {_describe(self._expected)} but "
                                          f"contained only {count} elements.")

    def _cardinality(self) -> int:
        return self._expected


def _describe(expected: int) -> str:
    return "an infinite number of elements" if expected == _card.INFINITE_CARDINALITY else f"{expected} elements"


def assert_cardinality(expected_cardinality: Any) -> Callable[[Dataset], Dataset]:
    """``md.data.experimental.assert_cardinality(n)``: a transformation for ``Dataset.apply``."""
    return lambda dataset: AssertCardinalityDataset(dataset, expected_cardinality)


class DirectedInterleaveDataset(Dataset):
    """Elements of ``datasets`` in the order a selector picks them: ``choose_from_datasets`` (the
    indices of ``choice_dataset``) and ``sample_from_datasets`` (random indices by weight)."""

    def __init__(self, datasets: list, selector: Callable[[list], Any], stop_on_empty_dataset: bool):
        datasets = list(datasets)
        if not datasets:
            raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
        for d in datasets:
            if not isinstance(d, Dataset):
                raise TypeError(f"Invalid `datasets`: every entry must be a md.data.Dataset, got {d!r}.")
        first = datasets[0].element_spec
        for d in datasets[1:]:
            if not structure.same_structure(first, d.element_spec) or any(
                    a.dtype != b.dtype for a, b in zip(structure.flatten(first), structure.flatten(d.element_spec))):
                raise TypeError(f"Incompatible dataset elements:\n  {first}\nvs.\n  {d.element_spec}")
        self._inputs = tuple(datasets)
        self._selector = selector
        self._stop = bool(stop_on_empty_dataset)

    def _iterate(self):
        sources = [d._iterate() for d in self._inputs]
        alive = [True] * len(sources)
        try:
            for index in self._selector(alive):
                if not 0 <= index < len(sources):
                    raise InvalidArgumentError(f"Selector index out of range: {index} >= {len(sources)}")
                if not alive[index]:
                    continue
                try:
                    yield next(sources[index])
                except StopIteration:
                    if self._stop:
                        return
                    alive[index] = False
                    if not any(alive):
                        return
        finally:
            for source in sources:
                source.close()

    def _cardinality(self) -> int:
        return _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        return self._inputs[0].element_spec


def choose_from_datasets(datasets: list, choice_dataset: Dataset, stop_on_empty_dataset: bool = True) -> Dataset:
    """Element ``i`` from ``datasets[choice_dataset[i]]``; ``choice_dataset`` holds int64 scalars."""
    spec = choice_dataset.element_spec if isinstance(choice_dataset, Dataset) else None
    if structure.is_structure(spec) or spec is None or spec.dtype != torch.int64 or spec.shape != ():
        raise TypeError("Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `int64` tensors but "
                        f"are {spec!r}. Cast them: choice_dataset.map(lambda i: md.cast(i, md.int64)).")

    def selector(alive: list):
        for choice in choice_dataset:
            yield int(choice)
    return DirectedInterleaveDataset(datasets, selector, stop_on_empty_dataset)


def sample_from_datasets(datasets: list, weights: Any = None, seed: Any = None, stop_on_empty_dataset: bool = False,
                         rerandomize_each_iteration: Any = None) -> Dataset:
    """Elements drawn at random from ``datasets`` with probabilities ``weights`` (uniform by default);
    an exhausted dataset leaves the draw (its weight is shared out) unless ``stop_on_empty_dataset``.
    The draws come from numpy's generator, not TF's: equal seeds give equal orders within multidev."""
    n = len(datasets)
    probs = np.full(n, 1.0 / max(n, 1)) if weights is None else np.asarray(
        [float(w) for w in (weights.tolist() if isinstance(weights, torch.Tensor) else weights)], dtype=np.float64)
    if len(probs) != n:
        raise ValueError(f"Invalid `weights`. The shape of `weights` should be compatible with `[len(datasets)]` "
                         f"but is {list(probs.shape)!r} for {n} datasets.")
    if (probs < 0).any() or probs.sum() <= 0:
        raise InvalidArgumentError(f"Invalid `weights`: they must be non-negative and not all zero, got {probs!r}.")
    epochs = [0]

    def selector(alive: list):
        rng = np.random.default_rng(None if seed is None else [as_int("seed", seed), epochs[0]])
        if not is_peeking() and rerandomize_each_iteration:
            epochs[0] += 1
        while any(alive):
            p = probs * np.asarray(alive, dtype=np.float64)
            if p.sum() <= 0:
                return
            yield int(rng.choice(n, p=p / p.sum()))
    return DirectedInterleaveDataset(datasets, selector, stop_on_empty_dataset)


def get_single_element(dataset: Dataset) -> Any:
    """The only element of ``dataset`` (InvalidArgumentError if it has none or several)."""
    source = dataset._iterate()
    try:
        try:
            element = next(source)
        except StopIteration:
            raise InvalidArgumentError("Dataset was empty.") from None
        try:
            next(source)
        except StopIteration:
            return element
        raise InvalidArgumentError("Dataset had more than one element.")
    finally:
        source.close()
