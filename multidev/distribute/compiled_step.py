"""``optimizer.step()`` over distributed variables called from ``torch.compile``d code (a compiled train
step, ``torch.compile(opt.step)``, ``md.function(jit_compile=True)``) runs eagerly, as one graph break.

A replica's step is multidev's machinery, not tensor math dynamo can trace: the pre-hook meets the
other replicas to sum gradients, swaps in the replica's *twin* (``optimizer_hooks``), whose state may
be a mapping over the user's dict (``_StateByVariable``: dynamo guards an optimizer's ``state`` as a
``dict`` and failed on it with ``InternalTorchDynamoError``), and the post-hook publishes the new
values. Traced, each of these would be a graph break with guards on the replica's objects (a
recompilation per replica and per break). So under dynamo the pre-hook runs the whole step itself
with dynamo disabled (reduce, the class's own ``step`` on the twin, publish) and hands torch's step
wrapper an empty *stand-in* of the optimizer (no parameter groups) whose ``step`` does nothing but
return the step's result; the post-hook has nothing left to do. Torch still runs the user's own step
hooks, a scheduler's step counter and the profiler on the user's object, as in eager mode. The
forward and its backward stay compiled. (DDP's compiled optimizer step compiles the update's math, and
torch's compiled Adam rounds its bias correction in float32: ``docs/ddp_port.md``, "torch.compile".)

An optimizer whose step calls its closure itself (LBFGS) or is written outside torch (SAM's calls its
closure and its base optimizer's ``step``; the stand-in would carry those along) is refused there.
"""

from __future__ import annotations

import copy
import sys
import weakref
from collections import defaultdict
from typing import Any, Callable

import torch
from torch._C._dynamo import eval_frame as _eval_frame

_compiling = torch.compiler.is_compiling
_dynamo_callback = _eval_frame.get_eval_frame_callback

#: optimizer -> its empty stand-in (one per optimizer: dynamo guards the stand-in's step once).
_STAND_INS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, torch.optim.Optimizer]" = weakref.WeakKeyDictionary()


def under_dynamo() -> bool:
    """Whether this call is traced by dynamo, or runs between graph breaks of compiled code (dynamo's
    frame callback is set in this thread: frames called from here would be compiled). Traced, the
    first test is the constant True and the second is never reached."""
    return _compiling() or _dynamo_callback() is not None


def step_eagerly(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict, pre: Callable,
                 post: Callable, calls_closure: Callable[[], bool]) -> tuple | None:
    """``_step_eagerly`` with dynamo disabled (a graph break when traced). Wrapped at the first use:
    ``torch.compiler.disable`` imports ``torch._dynamo``, which must not happen at multidev's import: with it
    imported, checkpointed dropout on replicas recomputes other masks (tests/distribute/test_replica_random_state.py
    fails; programs that use torch.compile import it anyway: docs/ddp_port.md, "torch.compile")."""
    if not _DISABLED:
        _DISABLED.append(torch.compiler.disable(_step_eagerly))
    return _DISABLED[0](optimizer, args, kwargs, pre, post, calls_closure)


_DISABLED: list = []


def _step_eagerly(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict, pre: Callable,
                  post: Callable, calls_closure: Callable[[], bool]) -> tuple | None:
    """The replica's whole step with dynamo off: ``pre`` (reduce, choose the twin), the class's own
    step on the twin, ``post`` (publish). Returns the step wrapper's new arguments: the stand-in and a
    closure giving the step's result; None for an optimizer over no distributed variable (torch and
    dynamo step it as usual)."""
    if calls_closure():
        raise NotImplementedError(
            f"{type(optimizer).__name__}.step() was called from torch.compile'd code inside strategy.run, but its step "
            "is LBFGS's or written outside torch (it may call its closure, or another optimizer, itself), which "
            "multidev runs only outside compiled code. "
            "Keep the optimizer step out of the compiled function: compile the model (torch.compile(model)) or the "
            "loss, or wrap the step in torch.compiler.disable.")
    replaced = pre(optimizer, args, kwargs)
    if replaced is None:
        return None
    twin_args, twin_kwargs = replaced
    result = _class_step(optimizer)(*twin_args, **twin_kwargs)
    post(optimizer, args, kwargs)
    closure = args[1] if len(args) > 1 else kwargs.get("closure")
    return (stand_in(optimizer),), ({"closure": lambda: result} if closure is not None else {})


def _class_step(optimizer: torch.optim.Optimizer) -> Callable:
    """The class's own ``step``, without torch's hook-running wrapper (what the wrapper calls)."""
    step = type(optimizer).step
    return getattr(step, "__wrapped__", step) if getattr(step, "hooked", False) else step


def stand_in(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """An object of the optimizer's class with its settings and no parameter groups: its ``step``
    updates nothing and returns its closure's value."""
    empty = _STAND_INS.get(optimizer)
    if empty is None:
        empty = copy.copy(optimizer)
        empty.param_groups, empty.state = [], defaultdict(dict)
        empty._multidev_twin = True   # (optimizer_hooks: not a user's optimizer over shared tensors)
        _STAND_INS[optimizer] = empty
    return empty



def refuse_compiled_autograd(strategy: Any, replicas: int) -> None:
    """``torch._dynamo.config.compiled_autograd = True`` with several replica threads in one process:
    compiled autograd is one per process (module-level flags, a nesting depth), so replicas' compiled
    steps failed inside torch ("Trying to run compiled autograd within another compiled autograd call",
    "Nested Compiled Autograd Contexts must return before their parent context"). Refused when
    ``strategy.run`` starts, naming the fixes."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or not dynamo.config.compiled_autograd:
        return
    raise NotImplementedError(
        f"torch._dynamo.config.compiled_autograd=True cannot run with {replicas} replicas of "
        f"{type(strategy).__name__} in one process: torch compiles one backward at a time per process, and the "
        "replicas' backward passes run together. Set torch._dynamo.config.compiled_autograd = False (a compiled "
        "forward's backward is still compiled with it, as AOTAutograd does), or run one replica per process "
        "(MultiWorkerMirroredStrategy with one device per worker).")
