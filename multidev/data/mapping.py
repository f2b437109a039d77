"""Function-applying transformations: ``map`` (optionally on threads), ``filter``, ``flat_map``."""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Callable

import torch

from multidev._core.eager_tensor import EagerTensor, eager
from multidev.data import cardinality as _card
from multidev.data import processes
from multidev.data import structure
from multidev.data._checks import callable_arg, parallelism
from multidev.data.dataset import Dataset, peeking, spec_of_element
from multidev.data.inline import op_determinism_enabled
from multidev.data.spec import TensorSpec
from multidev.data.threads import ParallelMapper
from multidev.data.transforms import _UnaryDataset


#: Calls timed in the consumer's thread before a parallel map picks threads or worker processes.
_CALIBRATION_CALLS = 2


def call_unpacked(fn: Callable, element: Any) -> Any:
    """Call ``fn`` the way tf.data does: tuple elements as positional arguments, each tensor an ``EagerTensor``
    (TensorFlow's immutable tensor: ``image /= 255`` in the tutorials' ``scale`` map binds a new tensor; torch's
    in-place division wrote the dataset's source, the program's own numpy array, once per pass)."""
    element = _immutable(element)
    if isinstance(element, tuple) and not hasattr(type(element), "_fields"):
        return fn(*element)
    return fn(element)


def _immutable(element: Any) -> Any:
    """``element`` with its tensors as ``EagerTensor``s (no copy: an alias whose augmented operators are
    out of place)."""
    if type(element) is torch.Tensor:
        return eager(element)
    if type(element) is tuple:
        return tuple(_immutable(e) for e in element)
    if type(element) is dict:
        return {k: _immutable(v) for k, v in element.items()}
    return element


def _plain(value: Any) -> Any:
    """``value`` with its ``EagerTensor``s back as plain tensors (what the rest of the pipeline holds)."""
    if type(value) is EagerTensor:
        return value.as_subclass(torch.Tensor)
    if type(value) in (tuple, list):
        return type(value)(_plain(v) for v in value)
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


def normalize_output(value: Any) -> Any:
    """Map outputs become elements: lists become tuples (as TF), values become (plain) tensors."""
    value = _plain(value)
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, list):
        value = tuple(value)
    return structure.to_element(value, "map_func output")


def auto_parallelism(dataset: Dataset) -> int:
    """Threads for AUTOTUNE: ``threading.private_threadpool_size`` or the CPU count (max 8)."""
    size = dataset.options().threading.private_threadpool_size
    return size if size is not None else max(2, min(8, os.cpu_count() or 2))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 2


def map_threads(dataset: Dataset, requested: int) -> int:
    """Threads for ``num_parallel_calls=requested``: at most the pool TensorFlow would run them on
    (``threading.private_threadpool_size``, else the core count, at least 2), and no more than the
    dataset has elements when that is known. ``num_parallel_calls=10**4`` must not start 10,001
    threads: the request bounds the calls in flight, it does not size a pool."""
    size = dataset.options().threading.private_threadpool_size
    workers = min(requested, size if size else max(2, _cores()))
    known = dataset._input._cardinality()
    return min(workers, max(1, known)) if known >= 0 else workers


class MapDataset(_UnaryDataset):
    """``map_func`` applied to each element; parallel calls keep input order."""

    def __init__(self, input_dataset: Dataset, map_func: Callable, num_parallel_calls: Any = None,
                 deterministic: bool | None = None):
        super().__init__(input_dataset)
        self._fn = callable_arg("map_func", map_func)
        self._num_parallel_calls = parallelism("num_parallel_calls", num_parallel_calls)

    def _apply(self, element: Any) -> Any:
        return normalize_output(call_unpacked(self._fn, element))

    def _iterate(self):
        workers = self._num_parallel_calls
        if workers == -1:
            workers = auto_parallelism(self)
        if workers is not None:
            workers = map_threads(self, workers)
        if workers is None or workers == 1 or op_determinism_enabled():   # TF: serial under determinism
            for element in self._input._iterate():
                yield self._apply(element)
            return
        # The pass's one draw from the caller's generator (the worker processes' seed) is made whichever workers
        # the timing below picks: the program's random stream after the pass must not depend on the clock.
        seed = processes.pass_seed()
        source = self._input._iterate()
        seconds, busy = [], []
        for element in itertools.islice(source, _CALIBRATION_CALLS):   # time a few calls in this thread
            start, cpu = time.perf_counter(), time.thread_time()
            out = self._apply(element)
            seconds.append(time.perf_counter() - start)
            busy.append(time.thread_time() - cpu)
            yield out
        if len(seconds) < _CALIBRATION_CALLS:
            return
        if processes.choose_processes(processes.map_workers_mode(), min(seconds), sum(busy) / max(sum(seconds), 1e-9)):
            mapper = processes.ProcessMapper(source, self._apply, workers, processes.chunk_size(min(seconds)), seed=seed)
        else:
            mapper = ParallelMapper(lambda: source, self._apply, workers, capacity=2 * workers)
        try:
            yield from mapper
        finally:
            mapper.stop()

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _compute_element_spec(self) -> Any:
        spec = _spec_from_first(self, "map")
        if _has_unknown_batch(self._input.element_spec):  # keep the batch dimension unknown
            spec = structure.map_structure(_unknown_leading_dim, spec)
        return spec


class FilterDataset(_UnaryDataset):
    """The elements for which ``predicate`` returns True."""

    def __init__(self, input_dataset: Dataset, predicate: Callable):
        super().__init__(input_dataset)
        self._predicate = callable_arg("predicate", predicate)

    def _iterate(self):
        for element in self._input._iterate():
            if _as_bool(call_unpacked(self._predicate, element)):
                yield element

    def _cardinality(self) -> int:
        return 0 if self._input._cardinality() == 0 else _card.UNKNOWN_CARDINALITY


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1 and value.dim() == 0:
        return bool(value)
    raise ValueError(
        "Invalid `predicate`: it must return a bool or a scalar torch.bool tensor, "
        f"but returned {value!r}."
    )


class FlatMapDataset(_UnaryDataset):
    """Each element mapped to a dataset; their elements chained in order."""

    def __init__(self, input_dataset: Dataset, map_func: Callable):
        super().__init__(input_dataset)
        self._fn = callable_arg("map_func", map_func)

    @property
    def map_func(self) -> Callable:
        return self._fn

    def _datasets(self):
        for element in self._input._iterate():
            result = call_unpacked(self._fn, element)
            if not isinstance(result, Dataset):
                raise TypeError(f"flat_map's map_func must return a md.data.Dataset, got {type(result).__name__}.")
            yield result

    def _iterate(self):
        for dataset in self._datasets():
            yield from dataset._iterate()

    def _cardinality(self) -> int:
        return _card.UNKNOWN_CARDINALITY if self._input._cardinality() != 0 else 0

    def _compute_element_spec(self) -> Any:
        for dataset in self._datasets():
            return dataset.element_spec
        raise ValueError("Cannot infer flat_map's element_spec: its input is empty.")


def _has_unknown_batch(spec: Any) -> bool:
    leaves = structure.flatten(spec)
    return all(leaf.shape is not None and len(leaf.shape) > 0 and leaf.shape[0] is None for leaf in leaves)


def _unknown_leading_dim(spec: TensorSpec) -> TensorSpec:
    if spec.shape is None or len(spec.shape) == 0:
        return spec
    return TensorSpec((None,) + spec.shape[1:], spec.dtype, spec.name)


def _spec_from_first(dataset: Dataset, what: str) -> Any:
    """Element spec of a function-transformed dataset, from its first two elements (TF traces instead):
    a dimension that differs between them is None, as TF shows a length that depends on the values
    (``map(lambda x: tf.fill([x], x))``); one that varies only later keeps the first elements' size."""
    with peeking():
        source = dataset._iterate()
    try:
        with peeking():
            first = next(source)
            second = next(source, None)
    except StopIteration:
        raise ValueError(f"Cannot infer the element_spec of {what}: the dataset is empty.") from None
    finally:
        source.close()
    spec = spec_of_element(first)
    return spec if second is None else _widened(spec, spec_of_element(second))


def _widened(a: Any, b: Any) -> Any:
    """``a`` with the dimensions where ``b`` differs made None (``a`` itself where the structures or
    dtypes differ: the element's own checks report that when it is produced)."""
    if not structure.same_structure(a, b):
        return a
    leaves = [x.most_specific_common_supertype(y) if isinstance(x, TensorSpec) and isinstance(y, TensorSpec) else None
              for x, y in zip(structure.flatten(a), structure.flatten(b))]
    if any(leaf is None for leaf in leaves):
        return a
    return structure.pack_as(a, leaves)
