"""``map`` on worker processes: for map functions whose time is Python (the GIL serialises threads).

Threads speed up a map function only where it waits or runs torch kernels without the GIL; a
function that spends its time in Python runs one call at a time on any number of threads. Worker
processes run such calls side by side. ``ProcessMapper`` keeps tf.data's guarantees:

* **order**: elements go out in chunks, numbered, and come back in input order;
* **bounded**: at most ``capacity`` chunks are in flight (an infinite input is read lazily);
* **determinism**: each chunk's calls start from torch/numpy/Python RNG states seeded from (a seed
  drawn once from the caller's torch generator per pass, the chunk's number), so random draws in
  the function do not depend on which worker ran the chunk (they differ from a serial run's stream);
* **errors**: an exception in a worker is raised in the consumer, with the worker's traceback.

Small tensors travel pickled by value (``_Packed``); large ones through shared memory
(``torch.multiprocessing``'s reductions: a segment per tensor, worth it only for large ones). Workers are forked
(as DataLoader does on Linux), so the function needs no pickling; where fork is unavailable, or
CUDA is initialised in this process (a forked child cannot use it), ``available()`` is False and
``map`` stays on threads.
"""

from __future__ import annotations

import itertools
import os
import random

import traceback
from collections import deque
from typing import Any, Callable, Iterator

import numpy as np
import torch

#: The functions the forked workers run, by token: set before the pool forks, inherited by it.
_FUNCTIONS: dict[int, Callable[[Any], Any]] = {}
_tokens = itertools.count()


def available() -> bool:
    """Whether worker processes can run map calls here (fork exists; CUDA not initialised)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and not torch.cuda.is_initialized()


def _worker_init() -> None:
    torch.set_num_threads(1)   # the workers are the parallelism: no oversubscribed intra-op pools


#: Tensors up to this size travel pickled by value; larger ones through shared memory (torch's way,
#: which costs a shared-memory segment per tensor: milliseconds, too much for small elements).
_BY_VALUE_BYTES = 1 << 20


class _Packed:
    """A small tensor as a numpy array (pickled by value, not through shared memory); dtypes numpy
    lacks (bfloat16...) travel as their bytes."""

    __slots__ = ("array", "dtype")

    def __init__(self, tensor: torch.Tensor):
        tensor = tensor.detach()
        self.dtype = tensor.dtype
        try:
            self.array = tensor.numpy()
        except TypeError:   # no numpy dtype: its bytes, and the shape
            self.array = (tensor.contiguous().view(torch.uint8).numpy(), tuple(tensor.shape))

    def unpack(self) -> torch.Tensor:
        if isinstance(self.array, tuple):
            raw, shape = self.array
            return torch.from_numpy(raw).view(self.dtype).reshape(shape)
        return torch.from_numpy(self.array)


def _pack(tree: Any) -> Any:
    """``tree`` (tensors in tuples, lists and dicts: tf.data's elements) with small CPU tensors packed."""
    if isinstance(tree, torch.Tensor):
        if tree.device.type == "cpu" and not tree.requires_grad and tree.numel() * tree.element_size() <= _BY_VALUE_BYTES:
            return _Packed(tree)
        return tree
    if isinstance(tree, (tuple, list)):
        packed = [_pack(v) for v in tree]
        return type(tree)(*packed) if hasattr(type(tree), "_fields") else type(tree)(packed)
    if isinstance(tree, dict):
        return type(tree)((k, _pack(v)) for k, v in tree.items())
    return tree


def _unpack(tree: Any) -> Any:
    if isinstance(tree, _Packed):
        return tree.unpack()
    if isinstance(tree, (tuple, list)):
        values = [_unpack(v) for v in tree]
        return type(tree)(*values) if hasattr(type(tree), "_fields") else type(tree)(values)
    if isinstance(tree, dict):
        return type(tree)((k, _unpack(v)) for k, v in tree.items())
    return tree


class _Columns:
    """A chunk of elements of one structure whose leaves are small CPU tensors of one shape and dtype per
    position: each position's leaves stacked into one array (one pickle per column, not per element)."""

    __slots__ = ("template", "columns", "count")

    def __init__(self, template: Any, columns: list, count: int):
        self.template, self.columns, self.count = template, columns, count


def _leaves(tree: Any, out: list) -> Any:
    """The structure of ``tree`` with each tensor replaced by its index in ``out`` (None: not columnar)."""
    if isinstance(tree, torch.Tensor):
        out.append(tree)
        return len(out) - 1
    if isinstance(tree, (tuple, list)):
        inner = [_leaves(v, out) for v in tree]
        return None if any(i is None for i in inner) else (type(tree), inner)
    if isinstance(tree, dict):
        inner = [(k, _leaves(v, out)) for k, v in tree.items()]
        return None if any(i is None for _, i in inner) else (type(tree), inner)
    return None


def _rebuild(template: Any, leaves: list) -> Any:
    if isinstance(template, int):
        return leaves[template]
    kind, inner = template
    if kind is dict or issubclass(kind, dict):
        return kind((k, _rebuild(t, leaves)) for k, t in inner)
    values = [_rebuild(t, leaves) for t in inner]
    return kind(*values) if hasattr(kind, "_fields") else kind(values)


def _pack_chunk(elements: list) -> Any:
    """``elements`` as ``_Columns`` when they share a structure of small same-shaped CPU tensors, else
    each packed alone (``_pack``)."""
    rows, template = [], None
    for element in elements:
        leaves: list = []
        shape = _leaves(element, leaves)
        if shape is None or (template is not None and shape != template) or any(
                t.device.type != "cpu" or t.requires_grad or t.numel() * t.element_size() > _BY_VALUE_BYTES
                or (rows and (t.shape != rows[0][i].shape or t.dtype != rows[0][i].dtype)) for i, t in enumerate(leaves)):
            return [_pack(e) for e in elements]
        template = shape
        rows.append(leaves)
    if not rows:
        return []
    columns = [_Packed(torch.stack([row[i].detach() for row in rows])) for i in range(len(rows[0]))]
    return _Columns(template, columns, len(rows))


def _unpack_chunk(packed: Any) -> list:
    if not isinstance(packed, _Columns):
        return [_unpack(e) for e in packed]
    columns = [c.unpack() for c in packed.columns]
    return [_rebuild(packed.template, [col[j] for col in columns]) for j in range(packed.count)]


def _run_chunk(token: int, seed: int, elements: list) -> tuple[bool, Any]:
    """In a worker: the function over one chunk, from RNG states of its own; (ok, results or traceback)."""
    fn = _FUNCTIONS[token]
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    try:
        return True, _pack_chunk([fn(e) for e in _unpack_chunk(elements)])
    except BaseException as err:  # noqa: BLE001 - carried to the consumer as text
        return False, (type(err).__name__, str(err), "".join(traceback.format_exception(err)))


class MapWorkerError(RuntimeError):
    """The map function raised in a worker process (its traceback is in the message)."""


def _reraise(info: tuple[str, str, str]) -> None:
    import builtins

    name, message, text = info
    cls = getattr(builtins, name, None)   # the same built-in type where there is one (ValueError, ...)
    error = cls(message) if isinstance(cls, type) and issubclass(cls, Exception) else MapWorkerError(f"{name}: {message}")
    raise error from MapWorkerError(f"in a md.data map worker process:\n{text}")


class ProcessMapper:
    """``fn`` over ``source``'s elements on ``workers`` forked processes, ``chunk`` elements a task,
    at most ``capacity`` tasks in flight, results in input order."""

    def __init__(self, source: Iterator, fn: Callable[[Any], Any], workers: int, chunk: int = 8,
                 capacity: int | None = None, seed: int | None = None):
        import torch.multiprocessing as tmp

        self._token = next(_tokens)
        _FUNCTIONS[self._token] = fn
        self._pool = tmp.get_context("fork").Pool(workers, initializer=_worker_init)
        self._source, self._chunk = source, max(1, chunk)
        self._capacity = capacity or 2 * workers
        self._seed = pass_seed() if seed is None else seed   # one draw per pass: deterministic per seed
        self._count = itertools.count()

    def _submit(self, pending: deque) -> bool:
        elements = list(itertools.islice(self._source, self._chunk))
        if not elements:
            return False
        seed = (self._seed + next(self._count) * 1_000_003) % 2**63
        pending.append(self._pool.apply_async(_run_chunk, (self._token, seed, _pack_chunk(elements))))
        return True

    def __iter__(self) -> Iterator[Any]:
        pending: deque = deque()
        more = True
        while more and len(pending) < self._capacity:
            more = self._submit(pending)
        while pending:
            ok, value = pending.popleft().get()
            if more:
                more = self._submit(pending)
            if not ok:
                _reraise(value)
            yield from _unpack_chunk(value)

    def stop(self) -> None:
        """End the workers (the consumer stopped early, finished, or failed)."""
        self._pool.terminate()
        self._pool.join()
        _FUNCTIONS.pop(self._token, None)


def pass_seed() -> int:
    """One draw from the caller's torch generator: a parallel map's pass makes it on threads and on processes
    alike (only processes use it), so which one timing picks never moves a seeded program's later draws."""
    return int(torch.randint(0, 2**62, (1,)).item())


def choose_processes(mode: str, seconds_per_call: float, busy_fraction: float = 1.0) -> bool:
    """Whether a parallel map runs on processes: ``mode`` is ``MULTIDEV_MAP_WORKERS`` ("auto", "threads"
    or "processes"); "auto" picks processes for calls that keep their thread busy (``busy_fraction``:
    thread CPU time over wall time, at least a half; a call that sleeps or waits on I/O does well on
    threads) and take 0.2 ms and more: sent in chunks of about 10 ms of calls (``chunk_size``),
    elements cost a worker little beside that."""
    if mode not in ("auto", "threads", "processes"):
        raise ValueError(f"MULTIDEV_MAP_WORKERS must be 'auto', 'threads' or 'processes', got {mode!r}.")
    if mode == "threads" or not available():
        return False
    return mode == "processes" or (seconds_per_call >= 2e-4 and busy_fraction >= 0.5)


def chunk_size(seconds_per_call: float) -> int:
    """Elements per task: about 10 ms of calls (1 to 256)."""
    return max(1, min(256, int(0.01 / max(seconds_per_call, 1e-6))))


def map_workers_mode() -> str:
    """The ``MULTIDEV_MAP_WORKERS`` setting (default "auto")."""
    return os.environ.get("MULTIDEV_MAP_WORKERS", "auto").strip().lower() or "auto"


__all__ = ["ProcessMapper", "MapWorkerError", "available", "choose_processes", "chunk_size", "map_workers_mode",
           "pass_seed"]
