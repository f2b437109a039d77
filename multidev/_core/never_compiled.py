"""``never_compiled(fn)``: dynamo (``torch.compile``) never compiles ``fn``'s frames, nor any frame it calls.

multidev runs code of its own inside a replica's compiled step: autograd hooks the engine calls in the
replica thread, random draws on a replica's stream, the ``backward`` wrapper. A compiled step leaves
dynamo's frame callback set in that thread, so dynamo compiled each such function as a frame of its own,
with guards on the replica (recompilations per replica and leaf), and - worse - a function that holds a
lock of multidev's while calling torch's Python code (a random draw under the streams' lock) waited for
dynamo's compile lock while another replica, compiling, waited for that lock in
``torch.get_rng_state`` (a deadlock: a compiled model with dropout on 2 replicas hung). Set on the code
object: nothing is paid per call (``torch.compiler.disable``'s wrapper costs 0.6 us per call).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from torch._C._dynamo import eval_frame as _eval_frame

F = TypeVar("F", bound=Callable)

#: dynamo's "skip this frame and every frame it calls" (what torch.compiler.disable does for a call).
_SKIP_ALL = _eval_frame._FrameExecStrategy(_eval_frame._FrameAction.SKIP, _eval_frame._FrameAction.SKIP)


def never_compiled(fn: F) -> F:
    """Mark ``fn`` (a function or method) never compiled by dynamo, nor anything it calls."""
    _eval_frame.set_code_exec_strategy(fn.__code__, _SKIP_ALL)
    return fn
