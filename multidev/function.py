"""``md.function``: TensorFlow's ``tf.function`` decorator; eager by default, ``torch.compile`` on request."""

from __future__ import annotations

import functools
from typing import Any, Callable


def function(func: Callable | None = None, *, input_signature: Any = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False, experimental_relax_shapes: Any = None,
             **compile_kwargs: Any) -> Any:
    """Mark ``func`` as a compiled step, like ``@tf.function``.

    PyTorch runs eagerly, so by default the function runs as written (same results, no tracing);
    ``next(iterator)`` past the end inside it raises ``md.errors.OutOfRangeError``, as in TensorFlow.
    ``jit_compile=True`` compiles it with ``torch.compile`` (extra keyword arguments go there).

    Example:
        >>> @md.function
        ... def add(a, b):
        ...     return a + b
    """

    def decorate(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"md.function decorates a callable, got {fn!r}.")
        target = fn
        if jit_compile:
            import torch

            target = torch.compile(fn, dynamic=reduce_retracing or None, **compile_kwargs)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return target(*args, **kwargs)
            except StopIteration as exc:   # next(iterator) past the end, as a tf.function reports it
                from multidev._core.errors import OutOfRangeError
                raise OutOfRangeError("End of sequence: an iterator was exhausted inside an md.function (TF's "
                                      "tf.function raises tf.errors.OutOfRangeError here; catch "
                                      "md.errors.OutOfRangeError).") from exc

        wrapper.python_function = fn  # as tf.function exposes it
        wrapper.input_signature = input_signature   # what md.saved_model.save traces
        return wrapper

    return decorate(func) if func is not None else decorate
