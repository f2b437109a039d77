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

Tensors travel through shared memory (``torch.multiprocessing``'s reductions). Workers are forked
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


def _run_chunk(token: int, seed: int, elements: list) -> tuple[bool, Any]:
    """In a worker: the function over one chunk, from RNG states of its own; (ok, results or traceback)."""
    fn = _FUNCTIONS[token]
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    try:
        return True, [fn(e) for e in elements]
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
                 capacity: int | None = None):
        import torch.multiprocessing as tmp

        self._token = next(_tokens)
        _FUNCTIONS[self._token] = fn
        self._pool = tmp.get_context("fork").Pool(workers, initializer=_worker_init)
        self._source, self._chunk = source, max(1, chunk)
        self._capacity = capacity or 2 * workers
        self._seed = int(torch.randint(0, 2**62, (1,)).item())   # one draw per pass: deterministic per seed
        self._count = itertools.count()

    def _submit(self, pending: deque) -> bool:
        elements = list(itertools.islice(self._source, self._chunk))
        if not elements:
            return False
        seed = (self._seed + next(self._count) * 1_000_003) % 2**63
        pending.append(self._pool.apply_async(_run_chunk, (self._token, seed, elements)))
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
            yield from value

    def stop(self) -> None:
        """End the workers (the consumer stopped early, finished, or failed)."""
        self._pool.terminate()
        self._pool.join()
        _FUNCTIONS.pop(self._token, None)


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


__all__ = ["ProcessMapper", "MapWorkerError", "available", "choose_processes", "chunk_size", "map_workers_mode"]
