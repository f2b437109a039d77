"""``prefetch``: produce elements ahead of the consumer on a background thread."""

from __future__ import annotations

from multidev._core.errors import InvalidArgumentError
from multidev.data._checks import as_int
from multidev.data.inline import background
from multidev.data.transforms import _UnaryDataset

AUTOTUNE_PREFETCH = 4  # buffer used for AUTOTUNE: enough to hide jitter, small in memory


class PrefetchDataset(_UnaryDataset):
    """Keeps up to ``buffer_size`` elements ready (AUTOTUNE: a fixed small buffer; 0: no thread)."""

    def __init__(self, input_dataset, buffer_size: int):
        super().__init__(input_dataset)
        size = as_int("buffer_size", buffer_size)
        if size < -1:
            raise InvalidArgumentError(
                f"prefetch buffer_size must be >= 0 or md.data.AUTOTUNE (-1), got buffer_size={size!r}."
            )
        self._buffer_size = AUTOTUNE_PREFETCH if size == -1 else size

    @property
    def buffer_size(self) -> int:
        return self._buffer_size

    def _iterate(self):
        if self._buffer_size == 0:
            yield from self._input._iterate()
            return
        producer = background(self._input._iterate, self._buffer_size)
        try:
            yield from producer
        finally:
            producer.stop()

    def _cardinality(self) -> int:
        return self._input._cardinality()
