"""``md.function``: TensorFlow's ``tf.function`` decorator; eager by default, ``torch.compile`` on request."""

from __future__ import annotations

import functools
from typing import Any, Callable

from multidev._core.variables_made import variables_made
from multidev.function_tracing import PerInstance, Traces, bind_signature, check_variables_made, spec_type, trace_type

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
             signature_error: type = TypeError, experimental_compile: bool | None = None, **compile_kwargs: Any) -> Any:
    """Mark ``func`` as a compiled step, like ``@tf.function``.

    PyTorch runs eagerly, so by default the function runs as written (same results, no tracing):
    its Python code (``print``, ``list.append``, Python ``next``) runs on every call, as under
    ``tf.config.run_functions_eagerly(True)``, where TensorFlow runs it once per trace. TensorFlow's
    tracing rules are kept where they decide results or errors (``function_tracing.py``):
    ``experimental_get_tracing_count()`` counts the traces TensorFlow would make (tensors by dtype and
    shape, relaxed with ``reduce_retracing``; Python values by value; per instance for a method),
    arguments that do not fit ``input_signature`` raise TypeError (Python lists are converted to its
    dtypes), and a call after the first trace that makes an ``md.Variable`` raises ValueError.
    ``next(iterator)`` past the end inside it raises ``md.errors.OutOfRangeError``, as in TensorFlow.
    ``jit_compile=True`` compiles it with ``torch.compile`` (extra keyword arguments go there);
    ``experimental_compile`` is TensorFlow's deprecated alias of ``jit_compile``.

    Example:
        >>> @md.function
        ... def add(a, b):
        ...     return a + b
    """

    jit_compile = _jit_compile(jit_compile, experimental_compile)

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

        name = getattr(fn, "__name__", repr(fn))
        per_instance = _takes_self(fn)
        shared, per_object = Traces(reduce_retracing), PerInstance(reduce_retracing)   # (a method's: per instance)

        def traces_for(args: tuple) -> Traces:
            return (per_object.get(args[0]) if per_instance and args else None) or shared

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if input_signature is None and not kwargs:
                _note_trace(wrapper.traced_signatures, args)
            if input_signature is not None:   # (a method's self is not in the signature)
                skip = 1 if per_instance and args else 0
                args = args[:skip] + bind_signature(name, input_signature, args[skip:], signature_error)
            if _RUN_EAGERLY:
                return _call(target(), args, kwargs)
            state = traces_for(args)
            call_type = ("signature",) if input_signature is not None else \
                (trace_type(args), trace_type(kwargs))
            before = variables_made()
            result = _call(target(), args, kwargs)
            traced = state.note(call_type)
            check_variables_made(name, before, first_trace=traced and not state.first_done)
            state.first_done = True
            return result

        def get_concrete_function(*args: Any, **kwargs: Any) -> Callable:
            concrete = _concrete_function(fn, input_signature, *args, **kwargs)
            state = traces_for(())
            state.note(("signature",) if input_signature is not None else
                       (tuple(spec_type(s) for s in concrete.input_signature), trace_type({})))
            return concrete

        wrapper.python_function = fn  # as tf.function exposes it
        wrapper.input_signature = input_signature   # what md.saved_model.save traces
        wrapper.traced_signatures = []   # without one: the input specs it was called with (TF's concrete functions)
        wrapper.get_concrete_function = get_concrete_function
        wrapper.experimental_get_tracing_count = lambda: shared.count + per_object.count()
        return wrapper

    return decorate(func) if func is not None else decorate


def _jit_compile(jit_compile: bool | None, experimental_compile: bool | None) -> bool | None:
    """``jit_compile``, or its deprecated alias ``experimental_compile`` (TensorFlow's argument lookup:
    a deprecation warning, and a ValueError when both are given)."""
    if experimental_compile is None:
        return jit_compile
    if jit_compile is not None:
        raise ValueError(f"Cannot specify both 'experimental_compile' and 'jit_compile' (got experimental_compile="
                         f"{experimental_compile!r}, jit_compile={jit_compile!r}): experimental_compile is the "
                         "deprecated name of jit_compile; pass jit_compile only.")
    import warnings

    warnings.warn("experimental_compile is deprecated, use jit_compile instead (md.function, as tf.function).",
                  DeprecationWarning, stacklevel=3)
    return experimental_compile


def _call(target: Callable, args: tuple, kwargs: dict) -> Any:
    try:
        return target(*args, **kwargs)
    except StopIteration as exc:   # next(iterator) past the end, as a tf.function reports it
        from multidev._core.errors import OutOfRangeError
        raise OutOfRangeError("End of sequence: an iterator was exhausted inside an md.function (TF's "
                              "tf.function raises tf.errors.OutOfRangeError here; catch "
                              "md.errors.OutOfRangeError).") from exc


def _takes_self(fn: Callable) -> bool:
    """Whether ``fn`` is a method (its first parameter is ``self``): TensorFlow traces per instance."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "self"


#: Input shapes remembered per function (TensorFlow warns of retracing long before; a step called with
#: ever new shapes should not grow a list without end).
_MAX_TRACED = 32


def _note_trace(traced: list, args: tuple) -> None:
    """Record the specs of a call's tensor arguments (``self`` of a method passed over), as TensorFlow
    traces one concrete function per input signature; ``md.saved_model.save`` exports them. A call
    with other arguments records nothing."""
    import numbers

    import numpy as np
    import torch

    from multidev.data.spec import TensorSpec

    if len(traced) >= _MAX_TRACED:
        return
    if args and isinstance(args[0], torch.nn.Module):
        args = args[1:]
    specs = []
    for a in args:
        if isinstance(a, (list, tuple)):
            if not _numbers(a):
                return          # a structure of tensors (a batch tuple): not traced for export
            try:
                array = np.asarray(a)
            except ValueError:  # ragged: TF's call would fail converting it too
                return
            if array.dtype.kind not in "fiu":
                return
            specs.append(TensorSpec(array.shape, torch.float32 if array.dtype.kind == "f" else torch.int32))
        elif isinstance(a, (torch.Tensor, np.ndarray)):
            tensor = torch.as_tensor(a)
            specs.append(TensorSpec(tuple(tensor.shape), tensor.dtype))
        elif isinstance(a, numbers.Number) and not isinstance(a, bool):
            specs.append(TensorSpec((), torch.float32 if isinstance(a, float) else torch.int32))
        else:
            return
    spec = tuple(specs)
    if spec and spec not in traced:
        traced.append(spec)


def _numbers(value) -> bool:
    """A non-empty (nested) list or tuple of Python numbers (TF converts it to one tensor)."""
    import numbers

    if isinstance(value, (list, tuple)):
        return bool(value) and all(_numbers(v) for v in value)
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _concrete_function(fn: Callable, input_signature: Any, *args: Any, **kwargs: Any) -> Callable:
    """``tf.function.get_concrete_function``: the function fixed to ``TensorSpec`` arguments (tensors and
    arrays stand for their shape and dtype; none: the ``input_signature``), what ``signatures=`` of
    ``md.saved_model.save`` takes. Nothing is traced until the save (torch runs eagerly)."""
    from multidev.data.spec import TensorSpec

    if kwargs:
        raise TypeError(f"get_concrete_function takes the arguments' TensorSpecs by position in multidev; got keyword "
                        f"arguments {sorted(kwargs)!r}. Pass them positionally, in the function's order.")
    given = args if args else tuple(input_signature or ())
    if not given:
        raise ValueError(f"get_concrete_function of {getattr(fn, '__name__', fn)!r} needs a TensorSpec per argument "
                         "(or an md.function(input_signature=...)).")
    specs = []
    for arg in given:
        if isinstance(arg, TensorSpec):
            specs.append(arg)
        elif hasattr(arg, "shape") and hasattr(arg, "dtype"):   # a tensor or an array: its shape and dtype
            import torch
            specs.append(TensorSpec(tuple(arg.shape), torch.as_tensor(arg).dtype))
        else:
            raise TypeError(f"get_concrete_function argument {arg!r} is not an md.TensorSpec or a tensor; multidev "
                            "fixes only tensor arguments (Python values are not traced).")
    from multidev._core.errors import InvalidArgumentError

    # A concrete function refuses other inputs with InvalidArgumentError, as TensorFlow's does.
    return function(fn, input_signature=specs, signature_error=InvalidArgumentError)

