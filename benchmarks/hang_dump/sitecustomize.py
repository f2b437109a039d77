"""Loaded by every Python started with this folder on PYTHONPATH (``benchmarks/gpu_tests.sh``): with
``HANG_DUMP_S`` set, a process still running after that many seconds prints every thread's stack and exits.
A test's fresh interpreter dumps first (its stacks reach the test's failure report); a pytest process later.
On the H200 this turned "timed out" into the deadlock's two threads (autograd's device thread in the gradient
reduction, the other replica's backward queued behind it)."""

import faulthandler
import os
import sys

_seconds = os.environ.get("HANG_DUMP_S")
if _seconds:
    _pytest = any("pytest" in a for a in getattr(sys, "orig_argv", ()))
    faulthandler.dump_traceback_later(float(_seconds) * (1.5 if _pytest else 1.0), exit=True)
