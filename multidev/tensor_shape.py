"""``md.TensorShape``: TensorFlow's (possibly partial) shape, for programs that spell shapes with it
(``from_generator(output_shapes=md.TensorShape([4]))``, ``md.TensorSpec(md.TensorShape([None, 3]))``).

    >>> import multidev as md
    >>> md.TensorShape([4, None]).as_list()
    [4, None]
"""

from __future__ import annotations

from typing import Any


class TensorShape:
    """Dimensions that are ints or None (unknown); ``TensorShape(None)`` has an unknown rank."""

    __slots__ = ("_dims",)

    def __init__(self, dims: Any):
        if isinstance(dims, TensorShape):
            dims = dims._dims
        if dims is None:
            self._dims = None
        elif isinstance(dims, int):
            self._dims = (dims,)
        else:
            self._dims = tuple(None if d is None else _dim(d) for d in dims)

    @property
    def rank(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    @property
    def dims(self) -> list | None:
        return None if self._dims is None else list(self._dims)

    def as_list(self) -> list:
        """The dimensions as a list (ValueError for an unknown rank, as TF)."""
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            return None if isinstance(key, int) else TensorShape(None)
        return TensorShape(self._dims[key]) if isinstance(key, slice) else self._dims[key]

    def __eq__(self, other: object) -> bool:
        try:
            other = TensorShape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._dims is None else f"TensorShape({list(self._dims)})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        return f"({self._dims[0]},)" if len(self._dims) == 1 else str(self._dims)


def _dim(d: Any) -> int:
    value = getattr(d, "value", d)   # TF 1's Dimension objects
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"Dimension value must be an integer or None, got {d!r} of type {type(d).__name__}.")
    return int(value)
