"""``md.function``: TensorFlow's ``tf.function`` decorator; eager by default, ``torch.compile`` on request."""

from __future__ import annotations

import functools
from typing import Any, Callable

_RUN_EAGERLY = False


def run_functions_eagerly(run_eagerly: bool) -> None:
    """``md.config.run_functions_eagerly``: run every ``md.function`` as written, even ``jit_compile=True``
    ones (to debug them with print and pdb), as ``tf.config.run_functions_eagerly`` does."""
    if not isinstance(run_eagerly, bool):
        raise TypeError(f"run_functions_eagerly expects a bool, got {run_eagerly!r}.")
    global _RUN_EAGERLY
    _RUN_EAGERLY = run_eagerly


def functions_run_eagerly() -> bool:
    """Whether ``run_functions_eagerly(True)`` is in effect."""
    return _RUN_EAGERLY


def executing_eagerly() -> bool:
    """``md.executing_eagerly()``: False while torch.compile traces (a ``jit_compile`` md.function), else True."""
    import torch

    return not torch.compiler.is_compiling()


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
        compiled: list = []     # torch.compile's wrapper, made at the first compiled call (importing it is slow)

        def target() -> Callable:
            if not jit_compile or _RUN_EAGERLY:
                return fn
            if not compiled:
                import torch

                compiled.append(torch.compile(fn, dynamic=reduce_retracing or None, **compile_kwargs))
            return compiled[0]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return target()(*args, **kwargs)
            except StopIteration as exc:   # next(iterator) past the end, as a tf.function reports it
                from multidev._core.errors import OutOfRangeError
                raise OutOfRangeError("End of sequence: an iterator was exhausted inside an md.function (TF's "
                                      "tf.function raises tf.errors.OutOfRangeError here; catch "
                                      "md.errors.OutOfRangeError).") from exc

        wrapper.python_function = fn  # as tf.function exposes it
        wrapper.input_signature = input_signature   # what md.saved_model.save traces
        return wrapper

    return decorate(func) if func is not None else decorate
