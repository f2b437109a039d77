"""Pipeline stages in the consumer's thread under ``md.config.experimental.enable_op_determinism()``.

TensorFlow then runs a ``map`` whose function draws random numbers serially and stops prefetching, so a seeded
pipeline gives the same elements on every run. md.data's functions draw from torch's default generator, which
the program's model (initializers, Dropout) draws from too: a background thread's draws interleave with the
model's by timing. Under op determinism every stage (``map``, ``prefetch``, parallel ``batch``/``interleave``)
runs in the consumer's thread, so the draws happen in program order, as one serial pipeline makes them.
"""

from __future__ import annotations

from typing import Callable, Iterator

from multidev.devices.determinism import op_determinism_enabled
from multidev.data.threads import BackgroundIterator


class InlineIterator:
    """``BackgroundIterator``'s interface over ``make_source()`` run in the consumer's thread."""

    def __init__(self, make_source: Callable[[], Iterator]):
        self._make_source = make_source
        self._source = None

    def __iter__(self) -> Iterator:
        self._source = self._make_source()
        yield from self._source

    def stop(self) -> None:
        if self._source is not None and hasattr(self._source, "close"):
            self._source.close()


def background(make_source: Callable[[], Iterator], capacity: int, name: str = "md.data.prefetch"):
    """A producer thread for ``make_source()`` (``capacity`` elements ahead), or the consumer's own thread
    under op determinism."""
    if op_determinism_enabled():
        return InlineIterator(make_source)
    return BackgroundIterator(make_source, capacity, name)


__all__ = ["InlineIterator", "background", "op_determinism_enabled"]
