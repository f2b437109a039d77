"""What a fuzzed call may do: return, or raise a documented TF exception from multidev's own code
with the offending value in its message; never an internal error (IndexError, KeyError, ...) or
a bare message from Python, numpy or torch."""

from __future__ import annotations

import os
import traceback

import numpy as np
import torch

import multidev as md

# TensorFlow's types for bad input (md.errors.InvalidArgumentError is a ValueError, md.errors
# FailedPreconditionError a RuntimeError: "cannot be modified after being initialized").
DOCUMENTED = (ValueError, TypeError, RuntimeError, md.errors.OpError)
INTERNAL = (AttributeError, IndexError, KeyError, RecursionError, OverflowError, ZeroDivisionError,
            AssertionError, UnicodeError, StopIteration)
_PACKAGE = os.path.dirname(os.path.abspath(md.__file__))
FAILED = object()  # what ``outcome`` returns when the call raised a documented error


def _raised_in_multidev(err: BaseException) -> bool:
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_PACKAGE)


def check_error(err: BaseException, *values) -> None:
    """Fail unless ``err`` is documented, raised by multidev, and names one of ``values`` (with !r)."""
    internal = isinstance(err, INTERNAL) and not isinstance(err, md.errors.OpError)
    assert isinstance(err, DOCUMENTED) and not internal, f"internal error {type(err).__name__}: {err}"
    assert _raised_in_multidev(err), (
        f"bare {type(err).__name__} from {traceback.extract_tb(err.__traceback__)[-1].filename}: {err}")
    shown = [repr(v) for v in values if len(repr(v)) <= 200]
    shown += [str(v) for v in values if isinstance(v, (np.integer, np.floating))]  # shown as the number it is
    shown += [repr(v.item()) for v in values if isinstance(v, torch.Tensor) and v.dim() == 0]
    if shown:
        assert any(r in str(err) for r in shown), f"{type(err).__name__} does not show any of {shown}: {err}"


def outcome(fn, *values):
    """``fn()``'s result, or ``FAILED`` after ``check_error`` accepted what it raised."""
    try:
        return fn()
    except BaseException as err:  # noqa: BLE001 - every exception is judged here
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        check_error(err, *values)
        return FAILED
