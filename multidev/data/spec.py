"""``TensorSpec``: the shape and dtype of one component of a dataset element.

Shapes are tuples whose entries are ints or ``None`` (unknown, e.g. a batch dimension that
depends on ``drop_remainder``); a shape of ``None`` means even the rank is unknown. String
components (file names, text lines) have ``dtype=str``: torch has no string tensors.

    >>> import multidev as md
    >>> md.data.Dataset.range(10).batch(4).element_spec
    TensorSpec(shape=(None,), dtype=torch.int64, name=None)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class SpecShape(tuple):
    """A spec's shape: a plain tuple (``==``, ``+``, slicing, ``len``) that also answers TF's
    ``TensorShape`` methods (``as_list()``, ``rank``, ``is_fully_defined()``, ...), as TF programs
    read ``ds.element_spec.shape.as_list()``."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from multidev.tensor_shape import TensorShape

        return getattr(TensorShape(tuple(self)), name)


class TensorSpec:
    """Describes a tensor: ``shape`` (tuple of int/None, or None) and ``dtype``.

    Example: ``md.data.TensorSpec(shape=(None, 300), dtype=torch.int64)``.
    """

    __slots__ = ("_shape", "_dtype", "_name")

    def __init__(self, shape: Any = None, dtype: Any = torch.float32, name: str | None = None):
        self._shape = _normalize_shape(shape)
        self._dtype = _normalize_dtype(dtype)
        self._name = name

    @property
    def shape(self) -> "SpecShape | None":
        """A tuple of ints/None (None: unknown rank) that also has TensorShape's methods."""
        return None if self._shape is None else SpecShape(self._shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self) -> str | None:
        return self._name

    @classmethod
    def from_value(cls, value: Any) -> "TensorSpec":
        """The spec of a concrete component (tensor, string or array of strings)."""
        if isinstance(value, torch.Tensor):
            return cls(tuple(value.shape), value.dtype)
        if isinstance(value, str):
            return cls((), str)
        if isinstance(value, np.ndarray):
            return cls(value.shape, str)
        raise TypeError(f"Unsupported dataset component {value!r} of type {type(value).__name__}.")

    def is_compatible_with(self, other: Any) -> bool:
        """True if ``other`` (a spec or a value) has the same dtype and a compatible shape."""
        if not isinstance(other, TensorSpec):
            try:
                other = TensorSpec.from_value(other)
            except TypeError:
                return False
        return self._dtype == other._dtype and shapes_compatible(self._shape, other._shape)

    def most_specific_common_supertype(self, other: "TensorSpec") -> "TensorSpec | None":
        """The spec both self and ``other`` satisfy (differing dims become None), or None."""
        if self._dtype != other._dtype:
            return None
        return TensorSpec(common_shape(self._shape, other._shape), self._dtype, self._name)

    def with_batch(self, batch_size: int | None) -> "TensorSpec":
        """The spec of a batch of such tensors (leading dimension ``batch_size``)."""
        shape = None if self._shape is None else (batch_size,) + self._shape
        return TensorSpec(shape, self._dtype, self._name)

    def unbatched(self) -> "TensorSpec":
        """The spec of one row of a batch described by this spec."""
        shape = None if self._shape is None else self._shape[1:]
        return TensorSpec(shape, self._dtype, self._name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TensorSpec)
            and self._shape == other._shape
            and self._dtype == other._dtype
            and self._name == other._name
        )

    def __hash__(self) -> int:
        return hash((self._shape, self._dtype, self._name))

    def __repr__(self) -> str:
        dtype = "str" if self._dtype is str else str(self._dtype)
        return f"TensorSpec(shape={self._shape}, dtype={dtype}, name={self._name!r})"


def _normalize_shape(shape: Any) -> tuple | None:
    if shape is None or getattr(shape, "rank", 0) is None:   # None or an unknown-rank md.TensorShape
        return None
    if isinstance(shape, int):
        raise TypeError(f"TensorSpec shape must be a sequence of ints/None, got {shape!r}; did you mean ({shape},)?")
    dims = tuple(None if d is None or (isinstance(d, int) and d < 0) else int(d) for d in shape)
    return dims


def _normalize_dtype(dtype: Any):
    if dtype is str or isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (bytes, np.str_, np.bytes_, "string", "str"):
        return str
    try:
        return torch.from_numpy(np.zeros((), dtype=np.dtype(dtype))).dtype
    except TypeError as exc:
        raise TypeError(f"Unsupported dtype {dtype!r}: expected a torch.dtype, a numpy dtype or str.") from exc


def shapes_compatible(a: tuple | None, b: tuple | None) -> bool:
    """TF's shape compatibility: unknown rank or None dims match anything."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def common_shape(a: tuple | None, b: tuple | None) -> tuple | None:
    """The most specific shape both ``a`` and ``b`` satisfy."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


__all__ = ["TensorSpec", "SpecShape", "shapes_compatible", "common_shape"]
