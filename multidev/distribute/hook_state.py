"""A module hook that stores a tensor in a Python dict or list every replica shares: refused.

Programs keep what their hooks see: ``activation = {}`` filled by ``register_forward_hook(lambda m, i, o:
activation.__setitem__(name, o))`` for a feature-matching or distillation loss (FitNets' teacher features,
a perceptual loss), Grad-CAM's ``gradients[name] = grad_output[0]`` from ``register_full_backward_hook``,
fastai's ``SaveFeatures`` object (``self.features = output`` in a bound-method hook). Each DDP rank has its
own dict; replicas are threads sharing one, so a replica whose forward overlapped another's read the
other's tensor. With a graph to the weights its ``backward()`` is refused (``shared_leaves``); a teacher's
features under ``no_grad``, a ``.detach()``-ed feature or a stored gradient carry none: the loss or the
map was silently another replica's, as often as the threads overlapped (timing, not the program, decided).

So while a strategy lives ``Module.register_*_hook`` wraps the hook: in a replica of a run of several, the
dicts and lists the hook reaches (its closure, the globals its code names, a ``functools.partial``'s
arguments, a bound method's plain object, one level of dicts of lists) are compared before and after the
call, and a slot (a dict key, a list's end) that two replicas of one run write a tensor into raises
``ValueError`` naming it and the per-replica fixes. That does not depend on the threads' timing: every
run has both replicas write the slot (checked calls take turns on one lock, so a write is put down to the
replica that made it; one waiting in a collective lets the other's call run unchecked after 1 s). Slots
keyed by replica (``activation[replica_id, name]``), module attributes (``module.out = o``:
``replica_attributes`` keeps them per replica) and hooks that write nothing pass. ``tensor.register_hook(fn)``
in a replica (Grad-CAM on an activation, a gradient-norm log appended to a list) is checked alike. Hooks
registered before the strategy existed, torch's and multidev's own, and callable objects (torch finds its
legacy ``weight_norm`` and ``prune`` hooks by type) are not wrapped.
"""

from __future__ import annotations

import functools
import threading
import types
from typing import Any, Callable

import torch
from torch.nn import Module

from multidev.values import context

_replica_env = context.replica_env
_REGISTER = ("register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
             "register_full_backward_pre_hook", "register_backward_hook")
_WRAPPED = (types.FunctionType, types.MethodType, functools.partial)
_lock = threading.Lock()
_calls = threading.RLock()   # held around a checked hook's call (nested hooks of one replica re-enter)
_CALL_WAIT_S = 1.0
# id(container) -> (container, {slot: replica id}): the slots written by the replicas of the runs going on;
# the container is held so that its id is not reused before ``leave_run`` empties the table
_written: dict[int, tuple[Any, dict]] = {}
_runs = [0]


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, torch.Tensor) for v in value)
    return isinstance(value, dict) and any(isinstance(v, torch.Tensor) for v in value.values())


def _containers(hook: Callable) -> list[tuple[str, Any]]:
    """(a name for the message, a dict or list) that ``hook`` reaches directly."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def add(name: str, value: Any) -> None:
        if isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            found.append((name, value))

    def visit(fn: Any, depth: int = 0) -> None:
        if isinstance(fn, functools.partial) and depth < 3:
            for i, arg in enumerate(fn.args):
                add(f"argument {i} of the partial", arg)
            for key, arg in fn.keywords.items():
                add(key, arg)
            return visit(fn.func, depth + 1)
        if isinstance(fn, types.MethodType):
            owner = fn.__self__
            if not isinstance(owner, Module) and hasattr(owner, "__dict__"):
                add(f"the {type(owner).__name__} object's attribute", vars(owner))
            fn = fn.__func__
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        for cell_name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                add(cell_name, cell.cell_contents)
            except ValueError:   # an empty cell
                pass
        scope = getattr(fn, "__globals__", {})
        for name in code.co_names:
            add(name, scope.get(name))

    visit(hook)
    return found


def _snapshot(container: Any) -> Any:
    if isinstance(container, list):
        return len(container)
    return {k: (id(v), len(v) if isinstance(v, list) else -1) for k, v in container.items()}


def _tensor_slots(container: Any, before: Any) -> list[tuple[Any, Any]]:
    """The slots the hook wrote a tensor into: (container, key) or (list, 'append')."""
    if isinstance(container, list):
        return [(container, "append")] if any(_holds_tensor(v) for v in container[before:]) else []
    slots = []
    for key, value in container.items():
        old = before.get(key)
        if old is not None and old[0] == id(value):
            if isinstance(value, list) and len(value) > old[1] and any(_holds_tensor(v) for v in value[old[1]:]):
                slots.append((value, "append"))
        elif _holds_tensor(value):
            slots.append((container, key))
    return slots


def _error(hook: Callable, name: str, key: Any, first: int, second: int) -> ValueError:
    where = f"{name}.append(...)" if key == "append" else \
        f"{name} {key!r}" if name.endswith("attribute") else f"{name}[{key!r}]"
    return ValueError(
        f"The module hook {getattr(hook, '__qualname__', hook)!r} stored a tensor in {where} in replica {first} "
        f"and in replica {second} of one strategy.run: the replicas are threads of one process sharing that "
        "Python object, where each DDP rank has its own, so a replica reads the tensor of whichever replica "
        "wrote last (another replica's features or gradients, silently when they carry no graph). Keep it per "
        "replica: key it by md.distribute.get_replica_context().replica_id_in_sync_group "
        "(activation[replica_id, name] = output), store it on the module (module.out = output is kept per "
        "replica), or return it from forward; or run one replica per process with `multidev launch`.")


def _record(hook: Callable, names: dict[int, str], slots: list[tuple[Any, Any]], replica_id: int) -> None:
    with _lock:
        if not _runs[0]:
            return
        for container, key in slots:
            _, writers = _written.setdefault(id(container), (container, {}))
            first = writers.setdefault(key, replica_id)
            if first != replica_id:
                raise _error(hook, names.get(id(container), "a list in a dict"), key, first, replica_id)


class _Checked:
    """The user's hook, checked in replicas; equal to it (and hashed as it), as torch's quantization finds
    its observer hooks with ``hook in hook_fns``."""

    __slots__ = ("hook", "__wrapped__")

    def __init__(self, hook: Callable):
        self.hook = self.__wrapped__ = hook

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hook, env = self.hook, _replica_env()
        if env is None or env.strategy.extended.num_local_replicas < 2:
            return hook(*args, **kwargs)
        if not _calls.acquire(timeout=_CALL_WAIT_S):   # a hook holding it waits in a collective: unchecked
            return hook(*args, **kwargs)
        try:   # one checked hook at a time: a write seen between the snapshots is this replica's own
            containers = _containers(hook)
            before = [_snapshot(c) for _, c in containers]
            result = hook(*args, **kwargs)
            slots = [s for (_, c), b in zip(containers, before) for s in _tensor_slots(c, b)]
        finally:
            _calls.release()
        if slots:
            _record(hook, {id(c): name for name, c in containers}, slots, env.replica_id)
        return result

    def __eq__(self, other: Any) -> bool:
        return self.hook == (other.hook if isinstance(other, _Checked) else other)

    def __hash__(self) -> int:
        return hash(self.hook)

    def __repr__(self) -> str:
        return repr(self.hook)


def _wrap(hook: Callable) -> Callable:
    if not isinstance(hook, _WRAPPED) or _library_hook(hook):
        return hook   # a callable object stays itself: torch finds its own by type (legacy weight_norm, prune)
    return _Checked(hook)


def _library_hook(hook: Any) -> bool:
    """torch's and multidev's own hooks (multidev's gradient reduction registers bound methods of its reducers)."""
    while isinstance(hook, functools.partial):
        hook = hook.func
    return getattr(hook, "__module__", None) is not None and hook.__module__.split(".")[0] in ("torch", "multidev")


def _wrap_tensor_register_hook(original: Callable) -> Callable:
    """``Tensor.register_hook`` checked in replicas; a subclass or mode is handed ``original`` as the function
    called (``whole_variable_ops`` answers a variable's ``register_hook`` by it)."""
    @functools.wraps(original)
    def register_hook(self: torch.Tensor, hook: Callable) -> Any:
        env = _replica_env()
        if env is not None and env.strategy.extended.num_local_replicas > 1:
            hook = _wrap(hook)
        if torch.overrides.has_torch_function_unary(self):
            return torch.overrides.handle_torch_function(original, (self,), self, hook)
        return original(self, hook)

    return register_hook


def enter_run() -> None:
    """Called by the replica runner as a run starts (paired with ``leave_run``)."""
    with _lock:
        _runs[0] += 1


def leave_run() -> None:
    with _lock:
        _runs[0] -= 1
        if not _runs[0]:
            _written.clear()


def _wrap_register(original: Callable) -> Callable:
    @functools.wraps(original)
    def register(self: Module, hook: Callable, *args: Any, **kwargs: Any) -> Any:
        return original(self, _wrap(hook), *args, **kwargs)

    return register


def install() -> Callable[[], None]:
    """Wrap the hook registrations; returns the undo (hooks wrapped stay wrapped: inert outside runs)."""
    originals = {name: Module.__dict__[name] for name in _REGISTER}
    for name, original in originals.items():
        setattr(Module, name, _wrap_register(original))
    tensor_original = torch.Tensor.__dict__["register_hook"]
    torch.Tensor.register_hook = _wrap_tensor_register_hook(tensor_original)

    def remove() -> None:
        for name, original in originals.items():
            setattr(Module, name, original)
        torch.Tensor.register_hook = tensor_original

    return remove
