"""``md.data.Iterator``: what ``iter(dataset)`` returns (TF's OwnedIterator).

    >>> import multidev as md
    >>> it = iter(md.data.Dataset.range(2))
    >>> int(it.get_next()), int(next(it))
    (0, 1)
    >>> it.get_next_as_optional().has_value()
    False

Closing the iterator (``close()``, leaving a ``for`` loop, or garbage collection) stops
any background threads the pipeline started.
"""

from __future__ import annotations

from typing import Any

from multidev._core.errors import InvalidArgumentError, OutOfRangeError
from multidev.data.text import user_facing


class Optional:
    """A value that may be absent (TF's ``tf.experimental.Optional``)."""

    __slots__ = ("_value", "_has_value", "_element_spec")

    def __init__(self, value: Any = None, has_value: bool = False, element_spec: Any = None):
        self._value = value
        self._has_value = has_value
        self._element_spec = element_spec

    def has_value(self) -> bool:
        return self._has_value

    def get_value(self) -> Any:
        """The value, or InvalidArgumentError if there is none."""
        if not self._has_value:
            raise InvalidArgumentError("Optional.get_value() called on an Optional that has no value.")
        return self._value

    @property
    def element_spec(self) -> Any:
        return self._element_spec


class Iterator:
    """Iterates a dataset once; ``next()`` raises StopIteration, ``get_next()`` OutOfRangeError."""

    def __init__(self, dataset: Any):
        self._dataset = dataset
        self._generator = dataset._iterate()
        self._done = False
        self._position = 0          # elements returned so far (what a checkpoint saves)

    def __iter__(self) -> "Iterator":
        return self

    def next(self) -> Any:
        """``next(iterator)`` as a method (TF's iterators have both)."""
        return self.__next__()

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        try:
            element = next(self._generator)
        except StopIteration:
            self.close()
            raise
        except BaseException:
            self.close()
            raise
        self._position += 1
        return user_facing(element)

    def get_next(self) -> Any:
        """The next element, or ``md.errors.OutOfRangeError`` at the end (as TF)."""
        try:
            return next(self)
        except StopIteration:
            raise OutOfRangeError("End of sequence") from None

    def get_next_as_optional(self) -> Optional:
        """The next element wrapped in an ``Optional`` (empty at the end)."""
        try:
            return Optional(next(self), True, self.element_spec)
        except StopIteration:
            return Optional(None, False, self.element_spec)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec

    def _restore_position(self, position: int) -> None:
        """Continue after the first ``position`` elements of the dataset (a checkpoint's restore):
        this pass is advanced if it has not gone past them, else a new pass is started and advanced.
        Exact for deterministic pipelines (and seeded shuffles whose pass matches the saved one)."""
        if self._position > position or self._done:
            self._generator.close()
            self._generator, self._done, self._position = self._dataset._iterate(), False, 0
        while self._position < position:
            try:
                next(self)
            except StopIteration:
                raise ValueError(f"Cannot restore the iterator to position {position}: its dataset ends after "
                                 f"{self._position} elements. Restore it over the dataset it was saved with.") from None

    def close(self) -> None:
        """Stop the pipeline now, joining its background threads."""
        self._done = True
        self._generator.close()

    def __del__(self) -> None:
        generator = getattr(self, "_generator", None)
        if generator is not None:
            generator.close()
