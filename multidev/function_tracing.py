"""What ``tf.function``'s tracing rules would do with a call, for ``md.function`` (which runs eagerly).

TensorFlow traces a new graph when a call's arguments match no earlier trace: tensors by dtype and
shape (with ``reduce_retracing``, shapes that differ are relaxed to ``None``), Python values by
value, other objects by identity; with an ``input_signature`` only once, and arguments that do not
fit it are refused. multidev keeps the count (``experimental_get_tracing_count``), applies the
signature's checks and conversions, and refuses a variable made on a call after the first trace,
as TensorFlow does ("tf.function only supports singleton tf.Variables created on the first call").
"""

from __future__ import annotations

import numbers
import weakref
from typing import Any, Sequence

import numpy as np
import torch

from multidev._core.variables_made import variables_made


class _Tensor(tuple):
    """A tensor argument's type: ``(dtype, shape)``, ``shape`` None (unknown rank) or a tuple of dims
    (None: any size)."""


def trace_type(value: Any) -> Any:
    """The part of an argument tracing looks at (hashable), as TensorFlow's tracing types."""
    if isinstance(value, torch.Tensor):
        return _Tensor((value.dtype, tuple(value.shape)))
    if isinstance(value, np.ndarray):
        return _Tensor((torch.as_tensor(value).dtype, value.shape))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(trace_type(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), trace_type(v)) for k, v in value.items())))
    if value is None or isinstance(value, (bool, numbers.Number, str, bytes)):
        return (type(value).__name__, value)
    from multidev.values.distributed import DistributedValues

    if isinstance(value, DistributedValues):   # a strategy's per-replica input: by its components' types
        return (type(value).__name__, tuple(trace_type(v) for v in value.values))
    return ("object", id(value))


def spec_type(spec: Any) -> _Tensor:
    """A TensorSpec's tracing type."""
    shape = None if spec.shape is None else tuple(None if d is None else int(d) for d in spec.shape)
    return _Tensor((spec.dtype, shape))


def _accepts(general: Any, specific: Any) -> bool:
    """Whether a trace of type ``general`` serves a call of type ``specific`` (TF's subtype rule)."""
    if isinstance(general, _Tensor) and isinstance(specific, _Tensor):
        (g_dtype, g_shape), (s_dtype, s_shape) = general, specific
        if g_dtype != s_dtype:
            return False
        if g_shape is None:
            return True
        return s_shape is not None and len(g_shape) == len(s_shape) and \
            all(g is None or g == s for g, s in zip(g_shape, s_shape))
    if isinstance(general, tuple) and isinstance(specific, tuple) and not isinstance(general, _Tensor) \
            and not isinstance(specific, _Tensor):
        return len(general) == len(specific) and all(_accepts(g, s) for g, s in zip(general, specific))
    return general == specific


def _relaxed(a: Any, b: Any) -> Any:
    """The most specific type that serves both (dims that differ become None), or None if none does."""
    if isinstance(a, _Tensor) and isinstance(b, _Tensor):
        if a[0] != b[0]:
            return None
        if a[1] is None or b[1] is None or len(a[1]) != len(b[1]):
            return _Tensor((a[0], None))
        return _Tensor((a[0], tuple(x if x == y else None for x, y in zip(a[1], b[1]))))
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and not isinstance(a, _Tensor) \
            and not isinstance(b, _Tensor):
        parts = [_relaxed(x, y) for x, y in zip(a, b)]
        return None if any(p is None and (x is not None) for p, x in zip(parts, a)) else tuple(parts)
    return a if a == b else None


#: Traces kept per function: TensorFlow warns of retracing after five; a function called with ever new
#: Python values must not grow a list (and its scan) without end. The count stops there.
_MAX_TRACES = 64


class Traces:
    """The traces one md.function (one per instance for a method) would hold in TensorFlow."""

    def __init__(self, reduce_retracing: bool):
        self.reduce_retracing = reduce_retracing
        self.types: list = []
        self.count = 0          # traces made (a relaxed trace replaces the one it generalizes, and counts)
        self.first_done = False

    def note(self, call_type: Any) -> bool:
        """Record a call of ``call_type``; True when TensorFlow would trace for it."""
        if any(_accepts(t, call_type) for t in self.types):
            return False
        if self.reduce_retracing:
            for i, t in enumerate(self.types):
                relaxed = _relaxed(t, call_type)
                if relaxed is not None:
                    self.types[i] = relaxed
                    self.count += 1
                    return True
        if len(self.types) < _MAX_TRACES:
            self.types.append(call_type)
            self.count += 1
        return True


class PerInstance:
    """A method's ``Traces`` per live instance (weak keys: a new instance at a collected one's address
    starts afresh). Pickled empty: a function sent to other processes (a parameter-server worker's
    ``schedule``) traces anew there."""

    def __init__(self, reduce_retracing: bool):
        self.reduce_retracing = reduce_retracing
        self.by_object: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self, instance: Any) -> Traces | None:
        """The instance's traces, or None for one that cannot be weakly referenced or hashed."""
        try:
            return self.by_object.setdefault(instance, Traces(self.reduce_retracing))
        except TypeError:
            return None

    def count(self) -> int:
        return sum(t.count for t in self.by_object.values())

    def __getstate__(self) -> dict:
        return {"reduce_retracing": self.reduce_retracing}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["reduce_retracing"])


def check_variables_made(name: str, before: int, first_trace: bool) -> None:
    """Refuse variables made by a call that is not the function's first trace (TensorFlow's rule)."""
    if variables_made() != before and not first_trace:
        raise ValueError(f"md.function {name!r} made an md.Variable on a call after its first: tf.function only "
                         "supports singleton tf.Variables created on the first call. Make the variable outside "
                         "the function, or only when it does not exist yet (if self.v is None: self.v = "
                         "md.Variable(...)).")


def bind_signature(name: str, signature: Sequence, args: tuple, error: type) -> tuple:
    """``args`` converted to the ``input_signature``'s dtypes, or ``error`` saying which one does not fit."""
    if len(args) != len(signature):
        raise TypeError(f"md.function {name!r} has input_signature {list(signature)!r}: it takes "
                        f"{len(signature)} positional argument(s), got {len(args)}.")
    return tuple(_bound(name, spec, arg, i, error) for i, (spec, arg) in enumerate(zip(signature, args)))


def _bound(name: str, spec: Any, arg: Any, index: int, error: type) -> Any:
    if not hasattr(spec, "dtype"):      # a nested signature: not checked (passed as given)
        return arg
    if isinstance(arg, torch.Tensor):
        tensor = arg
    else:
        try:
            array = np.asarray(arg)
        except (ValueError, TypeError) as exc:
            raise TypeError(f"md.function {name!r}: argument {index} {arg!r} is not a tensor for {spec!r}.") from exc
        target = torch.empty(0, dtype=spec.dtype)
        if array.dtype.kind == "f" and not (target.is_floating_point() or target.is_complex()):
            raise TypeError(f"md.function {name!r}: argument {index} {arg!r} cannot be converted to "
                            f"{str(spec.dtype).replace('torch.', 'md.')} for input_signature {spec!r}.")
        tensor = torch.as_tensor(array, dtype=spec.dtype)
    if tensor.dtype != spec.dtype or not _accepts(spec_type(spec), trace_type(tensor)):
        raise error(f"md.function {name!r}: argument {index} (dtype {str(tensor.dtype).replace('torch.', 'md.')}, "
                    f"shape {list(tensor.shape)}) does not fit its input_signature {spec!r}; pass a tensor of that "
                    "dtype and shape, or drop input_signature to accept any.")
    return tensor
