"""Make ``torch.nn.Module`` parameters and buffers created in ``strategy.scope()`` distributed.

torch calls the global registration hooks (registered while a strategy lives: ``live_hooks``) whenever
a module registers a parameter or buffer; in a distributing strategy's scope (cross-replica context) we return a distributed variable instead,
and give the module replica-aware ``_parameters``/``_buffers`` dicts. Inside ``strategy.run``,
``module.weight`` then resolves to the calling replica's own leaf tensor, so forward and backward
run on plain tensors at full speed: the cost is one dict lookup per attribute access.

The dict is the one change multidev makes to a user's object, kept because torch has no cheaper
seam: without it ``module.weight`` is the distributed variable and its ``__torch_function__``
picks the replica's copy on every op, which measured 56 us against 26 us per ``nn.Linear(64, 64)``
call on 2 CPU replicas (``OMP_NUM_THREADS=1``; about 1.5% of a text_conv step), while the
alternatives (``torch.func.functional_call``, parametrizations) change how the model is called
or its class. Outside ``strategy.run`` the dict answers exactly as torch's does.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Iterator

import torch
from torch.nn.modules import module as torch_module

from multidev.values import context
from multidev.values.variables import DistributedVariable


_replica_env = context.replica_env
_compiling = torch.compiler.is_compiling


#: type -> whether it is a DistributedVariable. ``isinstance`` against a ``torch.nn.Parameter``
#: subclass runs ``_ParameterMeta.__instancecheck__`` in Python (about 0.3 us, on every parameter read
#: of every replica); a parameter's type is one of a handful, so the answer is looked up instead.
_DISTRIBUTED_TYPES: dict[type, bool] = {}


def _is_distributed(value: Any) -> bool:
    kind = type(value)
    known = _DISTRIBUTED_TYPES.get(kind)
    if known is None:
        known = _DISTRIBUTED_TYPES[kind] = issubclass(kind, DistributedVariable)
    return known


class ReplicaAwareDict(dict):
    """A module's ``_parameters``/``_buffers``: item lookup yields the calling replica's component."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Any:
        value = dict.__getitem__(self, name)
        if _compiling():   # torch.compile traces this: a guarded thread-local instead of the ContextVar
            replica_id = context.traced_replica_id()
            return value if replica_id is None or not isinstance(value, DistributedVariable) \
                else value._components[replica_id]
        env = _replica_env()
        if env is None or not _is_distributed(value):
            return value
        # What ``value._view_for(replica_id)`` returns in a replica, without the method call.
        return value._components[env.replica_id]

    def __setitem__(self, name: str, value: Any) -> None:
        """A plain tensor written over a distributed buffer in cross-replica context (``module.double()``
        converting buffers, ``module.running_mean = t``) is written into every replica's copy; inside
        a replica, into that replica's copy (``self.count += 1`` hands back the replica's own tensor,
        as ``AveragedModel.update_parameters`` does with ``n_averaged``): the variable stays."""
        old = dict.get(self, name)
        if (isinstance(old, DistributedVariable) and isinstance(value, torch.Tensor)
                and not isinstance(value, torch.nn.Parameter) and value.shape == old._components[0].shape):
            env = _replica_env()
            if env is None:
                old.data = value
            else:
                own = old._components[env.replica_id]
                if value is not own:
                    with torch.no_grad():
                        own.copy_(value)
            return
        dict.__setitem__(self, name, value)


def _distributing_strategy() -> Any | None:
    if context.current_replica_id() is not None:
        return None  # modules built inside a replica function stay local to it
    strategy = context.current_scope_strategy()
    if strategy is None or not strategy.extended.distributes_variables:
        return None
    return strategy


def _make_replica_aware(module: torch.nn.Module, attribute: str) -> None:
    current = module.__dict__[attribute]
    if type(current) is not ReplicaAwareDict:
        module.__dict__[attribute] = ReplicaAwareDict(current)


def _distribute(module: torch.nn.Module, name: str, tensor: Any, attribute: str, create: str) -> Any:
    """The distributed variable replacing ``tensor`` (None: keep it), made by ``extended.<create>``."""
    if tensor is None or isinstance(tensor, DistributedVariable):
        return None
    strategy = _distributing_strategy()
    if strategy is None:
        return None
    var = getattr(strategy.extended, create)(module, name, tensor)
    _make_replica_aware(module, attribute)
    return var


def _on_parameter(module: torch.nn.Module, name: str, param: Any) -> Any:
    strategy = context.current_scope_strategy()
    if param is not None and strategy is not None and context.current_replica_id() is None:
        placed = strategy.extended.place_parameter(param)  # non-distributing strategies only move it
        if placed is not None:
            return placed
    var = _distribute(module, name, param, "_parameters", "create_variable_from_parameter")
    if var is None and param is not None and not isinstance(param, DistributedVariable):
        if context.current_replica_id() is None:
            _unscoped.add(module)
        else:
            _note_built_in_replica(param)   # the replica's own module: not shared with the others
    return var


# --- a module built outside strategy.scope() and called by several replicas ------------------------
#: Modules given a plain parameter outside a distributing scope and outside replicas: one object whose
#: parameters every replica would share (training them concurrently races and can crash the process).
#: Only while a strategy lives (its hooks see them): a module built before any strategy is not in it.
_unscoped: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


#: Parameters of modules built inside a replica function (each replica its own), by id (a tensor's
#: ``==`` is element-wise, so no WeakSet); an entry leaves with its tensor.
_built_in_replica: dict[int, weakref.ref] = {}


def _note_built_in_replica(param: torch.Tensor) -> None:
    key = id(param)
    _built_in_replica[key] = weakref.ref(param, lambda ref: _built_in_replica.get(key) is ref
                                         and _built_in_replica.pop(key, None))


def _is_built_in_replica(param: torch.Tensor) -> bool:
    ref = _built_in_replica.get(id(param))
    return ref is not None and ref() is param


def refuse_shared_parameters(optimizer: torch.optim.Optimizer) -> None:
    """Inside a run of several local replicas of a distributing strategy: ``optimizer.step()`` over
    plain parameters that no replica built (a module built before any strategy existed, which no hook
    saw) would have every replica update one set of parameters: ``ValueError`` before any update."""
    env = _replica_env()
    if env is None or env.strategy.extended.num_local_replicas == 1 or not env.strategy.extended.distributes_variables:
        return
    shared = [p for g in optimizer.param_groups for p in g["params"]
              if isinstance(p, torch.nn.Parameter) and p.requires_grad and p.grad is not None
              and not isinstance(p, DistributedVariable) and not _is_built_in_replica(p)]
    if shared:
        strategy = type(env.strategy).__name__
        shapes = [tuple(p.shape) for p in shared[:3]]
        raise ValueError(
            f"{type(optimizer).__name__}.step() inside {strategy}.run would update parameters (shapes {shapes}"
            f"{' ...' if len(shared) > 3 else ''}) that were built outside {strategy}.scope(): one set shared by all "
            f"{env.strategy.num_replicas_in_sync} replicas, whose updates would race. Build the model and its "
            "optimizer inside `with strategy.scope():` (after creating the strategy).")


def _refuse_shared(module: torch.nn.Module, args: Any) -> None:
    if module not in _unscoped:
        return
    env = _replica_env()
    if env is None:
        return
    plain = [n for n, p in module._parameters.items()
             if p is not None and p.requires_grad and not isinstance(p, DistributedVariable)]
    if plain:
        strategy = type(env.strategy).__name__
        raise ValueError(
            f"{type(module).__name__} (parameters {plain!r}) was built outside {strategy}.scope(), so its one set "
            f"of parameters would be shared by all {env.strategy.num_replicas_in_sync} replicas of strategy.run "
            "(their updates would race). Build the model and its optimizer inside `with strategy.scope():` "
            "(or freeze it with requires_grad_(False) if it is only read).")


@contextlib.contextmanager
def shared_module_guard() -> Iterator[None]:
    """Around a run of several local replicas: calling a module built outside the scope raises
    ``ValueError`` at its first forward, before any update. Costs nothing when no such module exists."""
    if not _unscoped:
        yield
        return
    handle = torch_module.register_module_forward_pre_hook(_refuse_shared)
    try:
        yield
    finally:
        handle.remove()


def _on_buffer(module: torch.nn.Module, name: str, buffer: Any) -> Any:
    return _distribute(module, name, buffer, "_buffers", "create_variable_from_buffer")


def install() -> Callable[[], None]:
    """Register the global registration hooks (they act only inside a strategy's scope); returns how
    to remove them. ``live_hooks.STRATEGY_HOOKS`` calls both while strategies live."""
    handles = [torch_module.register_module_parameter_registration_hook(_on_parameter),
               torch_module.register_module_buffer_registration_hook(_on_buffer)]
    return lambda: [h.remove() for h in handles]
