"""Nested element structures (tuples, namedtuples, dicts of components) and conversions.

A dataset element is a *component* (a ``torch.Tensor``, a ``str``, or a numpy array of
strings for batched strings) or a tuple/namedtuple/dict of elements, as in tf.data. Python
lists are values, not structures: ``[1, 2]`` becomes a tensor (as TensorFlow converts it).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from multidev._core.errors import ArgumentTypeError, InvalidArgumentError


def is_structure(value: Any) -> bool:
    """True for the containers tf.data treats as structure (tuple, namedtuple, dict)."""
    return isinstance(value, (tuple, dict))


def flatten(value: Any) -> list:
    """The components of ``value`` in a fixed order (dicts by sorted key, as TF's nest)."""
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in flatten(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted_keys(value) for leaf in flatten(value[key])]
    return [value]


def sorted_keys(value: dict) -> list:
    """The keys of a dict in sorted order (TF's nest order); TypeError when they do not sort."""
    try:
        return sorted(value)
    except TypeError:
        raise TypeError(
            f"The keys {list(value)!r} of a dict in this structure cannot be sorted (e.g. str and int "
            "mixed); tf.data orders dict components by key: use keys of one type."
        ) from None


def pack_as(structure: Any, leaves: list) -> Any:
    """Inverse of ``flatten``: rebuild ``structure`` with ``leaves`` in its place."""
    it = iter(leaves)
    result = _pack(structure, it)
    return result


def _pack(structure: Any, it) -> Any:
    if isinstance(structure, tuple):
        items = [_pack(item, it) for item in structure]
        return type(structure)(*items) if _is_namedtuple(structure) else tuple(items)
    if isinstance(structure, dict):
        packed = {key: _pack(structure[key], it) for key in sorted_keys(structure)}
        return type(structure)((key, packed[key]) for key in structure)
    return next(it)


def map_structure(fn: Callable, *values: Any) -> Any:
    """Apply ``fn`` to matching components of ``values`` (all of the same structure)."""
    first = values[0]
    if isinstance(first, tuple):
        items = [map_structure(fn, *parts) for parts in zip(*values)]
        return type(first)(*items) if _is_namedtuple(first) else tuple(items)
    if isinstance(first, dict):
        return type(first)((key, map_structure(fn, *(v[key] for v in values))) for key in first)
    return fn(*values)


def same_structure(a: Any, b: Any) -> bool:
    """True if ``a`` and ``b`` nest the same containers with the same keys and lengths."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            same_structure(x, y) for x, y in zip(a, b)
        )
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b) and all(
            same_structure(a[k], b[k]) for k in a
        )
    return True


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


# ---------------------------------------------------------------- conversions


def to_component(value: Any, what: str = "value") -> Any:
    """Convert one leaf to a dataset component: a torch tensor, a str, or an array of str.

    Python ints become int32 and floats float32, as TensorFlow converts them; numpy arrays
    keep their dtype. Ragged Python lists raise ValueError, as in TensorFlow.
    """
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return _from_numpy(value, what)
    if isinstance(value, (bool, int, float, np.generic)):
        return _from_numpy(_python_to_numpy(value, what), what)
    if isinstance(value, list):
        if value and all(isinstance(v, torch.Tensor) for v in value):
            return _stack_or_raise(value, what)
        return _from_numpy(_python_to_numpy(value, what), what)
    if hasattr(value, "__array__"):   # pandas Series/DataFrame columns (TF's dict(df) idiom), other array types
        return _from_numpy(np.asarray(value), what)
    raise ArgumentTypeError(   # TF: ValueError ("Attempt to convert a value ... with an unsupported type")
        f"Cannot convert {what} {_short(value)} of type {type(value).__name__} to a tensor: "
        "expected a torch.Tensor, numpy array, Python number/bool/str or (nested) list of them."
        + (_BATCH_OBJECT_HINT if what == "torch sample" else "")
    )


_BATCH_OBJECT_HINT = (
    " A batch object of another library (torch_geometric's Data / Batch, a dataclass) is no dataset element: "
    "return a tuple or dict of tensors from the collate_fn, or hand each replica its own batch with "
    "strategy.experimental_distribute_values_from_function (or md.distribute.PerReplica of one object per "
    "replica) and call strategy.run on it.")


def to_element(value: Any, what: str = "element") -> Any:
    """Convert a (nested) value to a dataset element; lists inside structures become tensors."""
    if isinstance(value, tuple):
        items = [to_element(v, what) for v in value]
        return type(value)(*items) if _is_namedtuple(value) else tuple(items)
    if isinstance(value, dict):
        return type(value)((k, to_element(v, f"{what}[{k!r}]")) for k, v in value.items())
    return to_component(value, what)


def _python_to_numpy(value: Any, what: str) -> np.ndarray:
    try:
        array = np.array(value)
    except ValueError as exc:  # numpy >= 1.24 refuses ragged nested lists
        raise ValueError(_ragged_message(value, what)) from exc
    if array.dtype == object:
        raise ValueError(_ragged_message(value, what))
    if array.dtype.kind in "iu" and not isinstance(value, np.generic) and _all_python(value):
        array = array.astype(np.int32) if _fits_int32(array) else array.astype(np.int64)
    elif array.dtype == np.float64 and not isinstance(value, np.generic) and _all_python(value):
        array = array.astype(np.float32)
    return array


def _all_python(value: Any) -> bool:
    if isinstance(value, (list, tuple)):   # [(7, 8), (9, 10)] is int32 in TF as [[7, 8], [9, 10]] is
        return all(_all_python(v) for v in value)
    return isinstance(value, (bool, int, float))


def _fits_int32(array: np.ndarray) -> bool:
    return array.size == 0 or (array.min() >= -(2**31) and array.max() < 2**31)


def _from_numpy(array: np.ndarray, what: str) -> Any:
    if array.dtype.kind in "US":
        return array.item() if array.ndim == 0 else array.astype(object)
    if array.dtype == object:
        if all(isinstance(v, (str, bytes)) for v in array.flat):
            return np.array([v.decode() if isinstance(v, bytes) else v for v in array.flat], dtype=object).reshape(array.shape)
        raise ValueError(_ragged_message(array, what))
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).copy()
    return torch.from_numpy(array)


def _stack_or_raise(tensors: list, what: str) -> torch.Tensor:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise ValueError(
            f"Can't convert non-rectangular list of tensors ({what}) to a tensor: shapes {sorted(shapes)}."
        )
    return torch.stack(tensors)


def _ragged_message(value: Any, what: str) -> str:
    return (
        f"Can't convert non-rectangular Python sequence {what} {_short(value)} to a tensor. "
        "Pad the sequences to one length (e.g. md.keras.preprocessing.sequence.pad_sequences), "
        "or pass a numpy object array of sequences to Dataset.from_tensor_slices to get "
        "variable-length elements (then batch them with padded_batch)."
    )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- batching


def stack_components(components: list, index: int = 0) -> Any:
    """Stack the same component of several elements into a batch (TF's ``batch`` rule)."""
    first = components[0]
    if isinstance(first, torch.Tensor):
        try:
            return torch.stack(components)
        except (RuntimeError, TypeError):
            _raise_unbatchable(components, index)
    if isinstance(first, (str, np.ndarray)):
        shapes = {np.shape(c) for c in components}
        if len(shapes) > 1:
            _raise_unbatchable(components, index)
        out = np.empty((len(components),) + np.shape(first), dtype=object)
        for i, c in enumerate(components):
            out[i] = c
        return out
    raise TypeError(f"Cannot batch component {index} of type {type(first).__name__}.")


def _raise_unbatchable(components: list, index: int) -> None:
    first_shape = list(np.shape(components[0]) if not isinstance(components[0], torch.Tensor) else components[0].shape)
    for i, c in enumerate(components[1:], start=1):
        shape = list(c.shape) if isinstance(c, torch.Tensor) else list(np.shape(c))
        if shape != first_shape:
            raise InvalidArgumentError(
                f"Cannot batch tensors with different shapes in component {index}. First element had "
                f"shape {first_shape} and element {i} had shape {shape}. Use padded_batch to pad "
                "variable-length elements to a common shape."
            )
        if isinstance(c, torch.Tensor) and c.dtype != components[0].dtype:
            raise InvalidArgumentError(
                f"Cannot batch tensors with different dtypes in component {index}: "
                f"{components[0].dtype} and {c.dtype} (element {i})."
            )
    raise InvalidArgumentError(f"Cannot batch component {index}: {_short(components)}")


def batch_elements(elements: list) -> Any:
    """Stack a list of elements (same structure) into one batched element."""
    flat = [flatten(e) for e in elements]
    stacked = [stack_components([f[i] for f in flat], i) for i in range(len(flat[0]))]
    return pack_as(elements[0], stacked)


def leading_dim(component: Any) -> int:
    """The batch (first) dimension of a batched component."""
    if isinstance(component, torch.Tensor):
        if component.dim() == 0:
            raise InvalidArgumentError("Cannot unbatch a scalar: the input elements must have a batch dimension.")
        return component.shape[0]
    return len(component)


def slice_component(component: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of a batched component."""
    return component[start:stop]


def concat_components(parts: list) -> Any:
    """Concatenate batched components along the batch dimension."""
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts)
    return np.concatenate(parts)


__all__ = [
    "is_structure", "flatten", "pack_as", "map_structure", "same_structure",
    "to_component", "to_element", "stack_components", "batch_elements",
    "leading_dim", "slice_component", "concat_components",
]
