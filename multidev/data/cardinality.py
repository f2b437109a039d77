"""Cardinality constants and arithmetic (TF's values: -1 infinite, -2 unknown)."""

from __future__ import annotations

import numpy as np

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class Cardinality(int):
    """What ``Dataset.cardinality()`` returns: an int that also has TF's ``.numpy()``.

    TF returns a scalar int64 tensor and its docs print ``ds.cardinality().numpy()``; an int
    keeps ``==``, ``range(n)`` and arithmetic plain, and ``.numpy()`` gives numpy's int64.
    """

    def numpy(self) -> np.int64:
        return np.int64(self)

    def __repr__(self) -> str:
        return int.__repr__(self)


def known(n: int) -> bool:
    """True for a finite, known element count."""
    return n >= 0


def batched(n: int, batch_size: int, drop_remainder: bool) -> int:
    """Cardinality after ``batch(batch_size, drop_remainder)``."""
    if not known(n):
        return n
    return n // batch_size if drop_remainder else -(-n // batch_size)


def repeated(n: int, count: int) -> int:
    """Cardinality after ``repeat(count)`` (count -1: forever)."""
    if count == 0 or n == 0:
        return 0
    if n == INFINITE_CARDINALITY:
        return INFINITE_CARDINALITY
    if count < 0:   # TF: forever is infinite unless the input is empty, even when its size is unknown
        return INFINITE_CARDINALITY
    return n * count if known(n) else n


def taken(n: int, count: int) -> int:
    """Cardinality after ``take(count)`` (count -1: all)."""
    if count < 0:
        return n
    if n == UNKNOWN_CARDINALITY:
        return UNKNOWN_CARDINALITY
    return count if n == INFINITE_CARDINALITY else min(n, count)


def skipped(n: int, count: int) -> int:
    """Cardinality after ``skip(count)`` (count -1: all)."""
    if not known(n):   # TF: skipping from an infinite (unknown) input stays infinite (unknown)
        return n
    return 0 if count < 0 else max(n - count, 0)


def sharded(n: int, num_shards: int, index: int) -> int:
    """Cardinality of shard ``index`` of ``num_shards``."""
    if not known(n):
        return n
    return n // num_shards + (1 if index < n % num_shards else 0)


def zipped(counts: list[int]) -> int:
    """Cardinality of ``zip``: the shortest input (unknown if any input's size is unknown, as TF)."""
    if UNKNOWN_CARDINALITY in counts:
        return UNKNOWN_CARDINALITY
    finite = [n for n in counts if known(n)]
    return min(finite) if finite else INFINITE_CARDINALITY


def concatenated(a: int, b: int) -> int:
    """Cardinality of ``a.concatenate(b)``."""
    if a == INFINITE_CARDINALITY or b == INFINITE_CARDINALITY:
        return INFINITE_CARDINALITY
    if not known(a) or not known(b):
        return UNKNOWN_CARDINALITY
    return a + b
