"""``md.cond``, ``md.while_loop`` and ``md.TensorArray``: TensorFlow's control flow as it runs eagerly.

An md.function runs its body as written (torch is eager), so TensorFlow's eager implementations are
the whole story: ``cond`` calls the branch its predicate picks, ``while_loop`` is a Python loop that
keeps ``loop_vars``' structure, and a ``TensorArray`` is a list of tensors of one dtype (the tf.function
guide's "Accumulating values in a loop").
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev._core.errors import InvalidArgumentError, OutOfRangeError


def cond(pred: Any, true_fn: Callable | None = None, false_fn: Callable | None = None, name: str | None = None) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()`` (only the chosen branch runs, as in TF's eager mode).

    Example:
        >>> x = md.constant(2)
        >>> int(md.cond(x < 5, lambda: x * 17, lambda: x + 23))
        34
    """
    for arg, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if fn is None:
            raise TypeError(f"cond(): '{arg}' argument required")
        if not callable(fn):
            raise TypeError(f"'{arg}' must be callable, got {fn!r}.")
    flag = torch.as_tensor(pred)
    if flag.numel() != 1:
        raise ValueError(f"cond(): 'pred' must be a scalar boolean, got shape {list(flag.shape)}; reduce it first "
                         "(md.reduce_all / md.reduce_any).")
    return true_fn() if bool(flag) else false_fn()


def while_loop(cond: Callable, body: Callable, loop_vars: Any, shape_invariants: Any = None,
               parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
               maximum_iterations: Any = None, name: str | None = None) -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``; the result has ``loop_vars``'
    structure (TF 2's ``tf.while_loop``).

    Example:
        >>> i = md.constant(0)
        >>> md.while_loop(lambda i: i < 10, lambda i: (i + 1,), [i])
        (tensor(10, dtype=torch.int32),)
    """
    if not callable(cond) or not callable(body):
        raise TypeError(f"while_loop(): 'cond' and 'body' must be callable, got {cond!r} and {body!r}.")
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError(f"while_loop(): loop_vars must be a tuple or list of the loop variables, got {loop_vars!r}; "
                        "write [x] for one.")
    if not loop_vars:
        raise ValueError("'loop_vars' must be provided.")
    current = loop_vars   # then the last body result's container, as TF returns it
    limit = None if maximum_iterations is None else int(torch.as_tensor(maximum_iterations))
    done = 0
    while (limit is None or done < limit) and bool(cond(*current)):
        result = body(*current)
        if not isinstance(result, (list, tuple)) or _structure(list(result)) != _structure(list(current)):
            raise ValueError(f"while_loop(): body returned {result!r}, not the structure of loop_vars "
                             f"({len(current)} value(s)); return one value per loop variable, in a tuple.")
        current, done = result, done + 1
    return type(current)(v if isinstance(v, TensorArray) else _tensor(v) for v in current)


def _structure(values: Any) -> Any:
    if isinstance(values, (list, tuple)):
        return tuple(_structure(v) for v in values)
    if isinstance(values, dict):
        return tuple(sorted((k, _structure(v)) for k, v in values.items()))
    return None


def _tensor(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_tensor(v) for v in value)
    if isinstance(value, dict):
        return {k: _tensor(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return value
    from multidev.ops import constant
    return constant(value)


class TensorArray:
    """A list of tensors of one dtype, written by index and stacked at the end (TF's eager TensorArray).

    Example:
        >>> ta = md.TensorArray(md.float32, size=2)
        >>> ta = ta.write(0, 1.0).write(1, 2.0)
        >>> ta.stack().tolist()
        [1.0, 2.0]
    """

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: bool | None = None,
                 clear_after_read: bool | None = None, tensor_array_name: str | None = None, handle: Any = None,
                 flow: Any = None, infer_shape: bool = True, element_shape: Any = None,
                 colocate_with_first_write_call: bool = True, name: str | None = None):
        from multidev.values.variable_inputs import variable_dtype

        if handle is not None:
            raise ValueError("TensorArray handles are not supported when eager execution is enabled.")
        if size is None:
            raise ValueError("Size must be declared for TensorArrays when eager execution is enabled: "
                             "md.TensorArray(dtype, size=n) (dynamic_size=True lets writes grow it).")
        self._dtype = variable_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._clear_after_read = True if clear_after_read is None else bool(clear_after_read)
        self._infer_shape = infer_shape
        self._element_shape = None if element_shape is None else tuple(element_shape)
        self._read: set = set()
        self._items: list = [None] * int(torch.as_tensor(size))

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def element_shape(self):
        return self._element_shape

    def size(self, name: str | None = None) -> torch.Tensor:
        return torch.tensor(len(self._items), dtype=torch.int32)

    def write(self, index: Any, value: Any, name: str | None = None) -> "TensorArray":
        """Store ``value`` at ``index``; returns the array (TF's programs reassign ``ta = ta.write(...)``)."""
        i = _index(index, "Writing to")
        if i >= len(self._items):
            if not self._dynamic_size:
                raise OutOfRangeError(f"Tried to write to index {i} but array is not resizeable and size is: "
                                      f"{len(self._items)} (md.TensorArray(..., dynamic_size=True) grows).")
            self._items.extend([None] * (i - len(self._items) + 1))
        tensor = value if isinstance(value, torch.Tensor) else _converted(value, self._dtype)
        if tensor.dtype != self._dtype:
            raise InvalidArgumentError(f"TensorArray dtype is {_name(self._dtype)} but Op is trying to write dtype "
                                       f"{_name(tensor.dtype)}; cast it: md.cast(value, {_name(self._dtype)}).")
        shape = tuple(tensor.shape)
        if self._element_shape is not None and (len(shape) != len(self._element_shape) or any(
                e is not None and e != s for e, s in zip(self._element_shape, shape))):
            raise ValueError(f"Incompatible shape for value ({list(shape)}), expected ({list(self._element_shape)})")
        if self._infer_shape:
            self._element_shape = shape
        self._items[i] = tensor
        return self

    def read(self, index: Any, name: str | None = None) -> torch.Tensor:
        i = _index(index, "Reading from")
        if i >= len(self._items):
            raise OutOfRangeError(f"Tried to read from index {i} but array size is: {len(self._items)}")
        tensor = self._items[i]
        if tensor is None:
            if i in self._read:
                raise InvalidArgumentError(f"Could not read index {i} twice because it was cleared after a previous "
                                           "read (perhaps try setting clear_after_read = false?)")
            tensor = self._zero(i)
        if self._clear_after_read:
            self._items[i] = None
            self._read.add(i)
        return tensor

    def stack(self, name: str | None = None) -> torch.Tensor:
        """Every element stacked on a new first dimension (unwritten ones are zeros)."""
        if not self._items:
            shape = (0,) + tuple(self._element_shape or ())
            return torch.zeros(shape, dtype=self._dtype)
        return torch.stack([self._zero(i) for i in range(len(self._items))])

    def gather(self, indices: Any, name: str | None = None) -> torch.Tensor:
        return torch.stack([self._zero(int(i)) for i in torch.as_tensor(indices).reshape(-1)])

    def concat(self, name: str | None = None) -> torch.Tensor:
        parts = [self._zero(i) for i in range(len(self._items))]
        if any(p.dim() == 0 for p in parts):
            raise InvalidArgumentError("Concat saw a scalar shape but requires at least vectors.")
        return torch.cat(parts)

    def unstack(self, value: Any, name: str | None = None) -> "TensorArray":
        tensors = list(torch.unbind(value if isinstance(value, torch.Tensor) else _converted(value, self._dtype)))
        if len(tensors) > len(self._items) and not self._dynamic_size:
            raise ValueError(f"Cannot unstack {len(tensors)} tensors into a TensorArray of static size "
                             f"{len(self._items)}")
        self._items = tensors
        return self

    def scatter(self, indices: Any, value: Any, name: str | None = None) -> "TensorArray":
        for i, v in zip(torch.as_tensor(indices).reshape(-1).tolist(), torch.unbind(torch.as_tensor(value))):
            self.write(i, v)
        return self

    def identity(self) -> "TensorArray":
        return self

    def close(self, name: str | None = None) -> None:
        self._items = []

    def _zero(self, i: int) -> torch.Tensor:
        if self._items[i] is None:
            self._items[i] = torch.zeros(tuple(self._element_shape or ()), dtype=self._dtype)
        return self._items[i]

    def __repr__(self) -> str:
        return f"<md.TensorArray dtype={_name(self._dtype)} size={len(self._items)}>"


def _index(index: Any, doing: str) -> int:
    i = int(torch.as_tensor(index))
    if i < 0:
        raise OutOfRangeError(f"{doing} negative indices (index {i}) is not allowed.")
    return i


def _converted(value: Any, dtype: torch.dtype) -> torch.Tensor:
    from multidev.ops import constant
    tensor = constant(value)
    if dtype.is_floating_point or not tensor.is_floating_point():
        return tensor.to(dtype)   # TF converts to the array's dtype where it can (preferred_dtype): 10 -> 10.0
    return tensor                 # (a float into an integer array: refused by write)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
