"""One tensor that several replicas' ``loss.backward()`` accumulate into: refused.

A tensor that requires grad and belongs to no module built in the scope ("Learning PyTorch with
Examples"' ``a = torch.full((), 0.0, requires_grad=True)``, even made in ``strategy.scope()``) is one
tensor for every replica: each replica's backward adds into its one ``.grad`` and a manual update in
the step (``a -= learning_rate * a.grad``, ``a.grad = None``) races with the other replicas' (trained
off DDP's result, silently, or torch's error where a replica read ``None``). An optimizer over such a
tensor is refused at its step (``module_hooks.refuse_shared_parameters``); a manual update has no step,
so ``loss.backward()`` in a replica checks which leaves its graph reaches: a leaf another replica's
backward reached in the same run raises ``ValueError`` (in the later replica: the earlier one may
already have updated it; the run fails either way). Leaves each replica has its own (a distributed
variable's copy, a replica's slice with ``requires_grad = True``, a tensor made in the step) pass; a
replica's backward that would reach another replica's copy (its loss used a tensor of a list on a
module that every replica appends to: reinforce's ``policy.saved_log_probs``) raises
``backward_reduce.crossed_error`` before it starts, naming the variable and the per-replica fix (in
a run not watched, ``backward_reduce``'s hook raises it, or it replaces torch's "backward through the
graph a second time" where the other replica's backward freed that part of the graph first).
Parameters are left to the checks of modules (``module_hooks``: a module built outside the scope is
refused at its forward, an optimizer over plain parameters at its step; Keras 3 at ``optimizer.apply``):
a bare ``nn.Parameter`` updated by hand in the step is not refused.

Walking the graph costs about 0.5 us per autograd node (80 us for a 2-layer transformer encoder), so it is done in the runs of a step function
until one of them walked a backward (``replica_run``: ``watching`` around such runs), as the shared
module guard watches a step function's first run; ``torch.autograd.grad`` accumulates nothing and is
not checked.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from typing import Any, Callable

import torch

from multidev._core.never_compiled import never_compiled
from multidev.distribute.backward_reduce import DEFERRED, IN_BACKWARD, crossed_error, hooked_copy_owner
from multidev.distribute.run_watches import RunWatches
from multidev.values import cross_replica_grads
from multidev.values.context import replica_env

_WATCHES = RunWatches()   # each strategy's run in progress
WATCHES = _WATCHES   # (read by other first-run checks without a call: ``reduced_grads``)


class LeafWatch:
    """One run's record: every leaf a replica's backward reached, with that replica's id."""

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy
        self._lock = threading.Lock()
        self._reached: dict[int, tuple[weakref.ref, int]] = {}
        self.walked = False

    def check(self, roots: tuple, replica_id: int) -> None:
        """Note the leaves ``roots``' graph reaches for ``replica_id``; raise if another replica's did."""
        leaves, copies = _leaves(roots)
        for owner, variable in copies:
            if owner != replica_id:
                raise crossed_error(replica_id, owner, repr(variable.name) if variable is not None else "a variable")
        with self._lock:
            self.walked = True
            shared = []
            for leaf in leaves:
                seen = self._reached.get(id(leaf))
                if seen is not None and seen[0]() is leaf and seen[1] != replica_id:
                    shared.append(leaf)
                elif seen is None or seen[0]() is not leaf:
                    self._reached[id(leaf)] = (weakref.ref(leaf), replica_id)
        if shared:
            raise _shared_error(self._strategy, shared)


def _leaves(roots: tuple) -> tuple[list, list]:
    """The tensors ``backward`` from ``roots`` would accumulate ``.grad`` into, but parameters and replica
    copies; and the ``(replica, variable)`` of each replica copy it reaches."""
    leaves, copies, seen = [], [], set()
    stack = []
    for root in roots:
        if isinstance(root, torch.Tensor) and root.requires_grad:
            if root.grad_fn is None:
                if not isinstance(root, torch.nn.Parameter):
                    leaves.append(root)
            else:
                stack.append(root.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if variable is not None:
            owner = None if isinstance(variable, torch.nn.Parameter) else hooked_copy_owner(variable)
            if owner is not None:
                copies.append(owner)
            elif not isinstance(variable, torch.nn.Parameter):   # a module's: its forward and its optimizer check
                leaves.append(variable)
            continue
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves, copies


def _shared_error(strategy: Any, shared: list) -> ValueError:
    name = type(strategy).__name__
    shapes = [tuple(t.shape) for t in shared[:3]]
    return ValueError(
        f"loss.backward() inside {name}.run would accumulate into tensors (shapes {shapes}"
        f"{' ...' if len(shared) > 3 else ''}) that are not mirrored and that another replica's backward reached "
        f"in the same run: tensors outside any torch.nn.Module (`torch.full((), 0.0, requires_grad=True)`, "
        f"`torch.randn(...).requires_grad_()`, even made in the scope). One such "
        f"tensor is shared by all {strategy.num_replicas_in_sync} replicas: their backward passes add into its one "
        ".grad and their updates (`w -= lr * w.grad`) race. Make a free-standing weight an md.Variable(...) created "
        "in the scope, or an attribute of a torch.nn.Module built there (its gradient is then reduced as DDP's).")


def watching(strategy: Any) -> contextlib.AbstractContextManager[LeafWatch]:
    """Check the backward passes of the run inside (caller thread, around the replicas' tasks)."""
    return _WATCHES.watching(strategy, LeafWatch(strategy))


def watched(strategy: Any) -> bool:
    """Whether ``strategy``'s run in progress is one whose backward passes are checked (a step function's
    first runs: other first-run checks, ``reduced_grads``, ride on it)."""
    return bool(_WATCHES) and _WATCHES.get(id(strategy)) is not None


def _roots(tensors: Any, args: tuple, kwargs: dict) -> tuple:
    inputs = args[4] if len(args) > 4 else kwargs.get("inputs")   # backward(..., inputs=): only those
    if inputs is not None:
        roots = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
        return tuple(t for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is None)
    return (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)


def _crossed_in(error: RuntimeError, roots: tuple, replica_id: int) -> RuntimeError | None:
    """torch's "backward through the graph a second time" in a replica whose graph reaches another
    replica's copy (a run not watched: that replica's backward freed the shared part first): the crossed
    replicas' error, which names the fix; None for any other error."""
    if "backward through the graph a second time" not in str(error):
        return None
    for owner, variable in _leaves(roots)[1]:
        if owner != replica_id:
            return crossed_error(replica_id, owner, repr(variable.name) if variable is not None else "a variable")
    return None


_AOT_RUNTIME = "torch._functorch._aot_autograd.runtime_wrappers"
_COMPILE_LOCK = threading.RLock()


def _serialize_lazy_backward_compile() -> None:
    """torch.compile compiles a compiled model's backward at its first backward, without a lock: two replica
    threads doing so together broke each other (one's FX tracing patches ``Module.__getattr__`` process-wide
    while the other deep-copies the graph: "'GraphModule' object has no attribute 'meta'", about one run in
    ten under load). Once torch.compile's runtime is loaded (a compiled forward ran), that compile takes
    dynamo's compile lock (another replica's forward compile traces too); a backward already compiled does
    not. (Importing it earlier would import dynamo half-way.)"""
    runtime = sys.modules.get(_AOT_RUNTIME)
    compiler = getattr(runtime, "_AutogradBackwardCompiler", None)
    original = getattr(compiler, "get_or_compile", None)
    if original is None or getattr(original, "_multidev_serialized", False):
        return

    # dynamo's own lock, which its forward compiles hold: another replica's forward compile traces with the same
    # process-wide patch (a CI run of 26421db and 2 of 5 runs here failed with only a backward lock of our own)
    lock = getattr(sys.modules.get("torch._dynamo.convert_frame"), "compile_lock", None) or _COMPILE_LOCK

    def get_or_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "compiled_bw", None) is not None:
            return self.compiled_bw
        with lock:   # (the second replica finds the first's compiled backward)
            return original(self, *args, **kwargs)

    get_or_compile._multidev_serialized = True
    compiler.get_or_compile = get_or_compile


def _checked(original: Callable) -> Callable:
    @never_compiled   # (the backward of a compiled step: never_compiled)
    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        env = replica_env()
        if env is None:
            cross_replica_grads.note_backward()   # (EWC's Fisher pass: the next run folds it into each p.grad)
            return original(tensors, *args, **kwargs)
        if _AOT_RUNTIME in sys.modules:
            _serialize_lazy_backward_compile()
        watch = _WATCHES.get(id(env.strategy)) if _WATCHES else None
        if watch is not None:
            watch.check(_roots(tensors, args, kwargs), env.replica_id)
        key = id(env.replica_step)
        IN_BACKWARD[key] = IN_BACKWARD.get(key, 0) + 1   # (a depth: a backward inside a hook's backward)
        try:
            result = original(tensors, *args, **kwargs)
        except RuntimeError as error:
            crossed = _crossed_in(error, _roots(tensors, args, kwargs), env.replica_id)
            if crossed is None:
                raise
            raise crossed from error
        finally:
            depth = IN_BACKWARD.pop(key)
            if depth > 1:
                IN_BACKWARD[key] = depth - 1
            finish = DEFERRED.pop(key, None) if DEFERRED and depth == 1 else None   # a CUDA backward's end
        if finish is not None:
            finish()
        return result
    backward.__wrapped__ = original
    return backward


def install() -> Callable[[], None]:
    """Wrap ``torch.autograd.backward`` (``Tensor.backward`` calls it) while strategies live."""
    original = torch.autograd.backward
    torch.autograd.backward = _checked(original)

    def remove() -> None:
        torch.autograd.backward = original
    return remove
