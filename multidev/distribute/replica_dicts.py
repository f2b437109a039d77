"""A module's replica-aware ``_parameters`` / ``_buffers`` dicts (``module_hooks`` installs them).

Inside ``strategy.run`` an item lookup yields the calling replica's own leaf tensor of a distributed
variable (``module.weight`` is replica r's copy: forward and backward run on plain tensors); outside it
the dict answers as torch's does. Writes: a plain tensor over a distributed buffer in cross-replica
context goes into every copy; inside a replica, see ``_write_in_replica``. While a ``functional_call``
runs (``functional_calls``), the tensors it swapped in for the calling thread (``REPLACED``) come first.
"""

from __future__ import annotations

import contextvars
import copy
import weakref
from typing import Any

import torch

from multidev.values import context
from multidev.values.variables import DistributedVariable

_replica_env = context.replica_env
_compiling = torch.compiler.is_compiling


#: type -> whether it is a DistributedVariable. ``isinstance`` against a ``torch.nn.Parameter``
#: subclass runs ``_ParameterMeta.__instancecheck__`` in Python (about 0.3 us, on every parameter read
#: of every replica); a parameter's type is one of a handful, so the answer is looked up instead.
_DISTRIBUTED_TYPES: dict[type, bool] = {}


#: What ``torch.func.functional_call`` swapped into modules for the calling thread only (a replica's, or
#: the caller's over distributed variables: ``functional_calls``): ``(id(dict), name) -> tensor``, while
#: the call runs.
REPLACED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("multidev_replaced_tensors", default=None)
SWAPPING = 0   # how many such calls are running, in all threads (``functional_calls.swapping``)
_ABSENT = object()


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
                or value._handed_whole else value._components[replica_id]
        if SWAPPING:   # (a global read: the ContextVar only while some thread is in a functional_call)
            replaced = REPLACED.get()
            if replaced is not None:
                swapped = replaced.get((id(self), name), _ABSENT)
                if swapped is not _ABSENT:
                    return swapped
        env = _replica_env()
        if env is None or not _is_distributed(value) or value._handed_whole:
            return value
        # What ``value._view_for(replica_id)`` returns in a replica, without the method call.
        return value._components[env.replica_id]

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickled (``torch.save(model, path)``) as a plain dict: the file loads as a torch module's."""
        return dict, (), None, None, iter(dict.items(self))

    def __deepcopy__(self, memo: dict) -> "ReplicaAwareDict | dict":
        """``copy.deepcopy(module)`` in the scope (MoCo's key encoder) stays replica-aware, its values
        deep-copied as before (a distributed variable's ``__deepcopy__`` makes a new one). Inside
        ``strategy.run`` it is the calling replica's own module (``_replica_copy``)."""
        env = _replica_env()
        if env is not None:
            return _replica_copy(self, memo, env.replica_id)
        new = type(self)()
        memo[id(self)] = new
        for name, value in dict.items(self):
            new[name] = copy.deepcopy(value, memo)
        return new

    def __setitem__(self, name: str, value: Any) -> None:
        """A plain tensor written over a distributed buffer in cross-replica context (``module.double()``
        converting buffers, ``module.running_mean = t``) is written into every replica's copy. Inside
        ``strategy.run``, see ``_write_in_replica``: the variable stays; a name a ``functional_call`` of
        the replica replaced takes the new tensor in its place, for that call only."""
        replaced = REPLACED.get() if SWAPPING else None
        if replaced is not None and (id(self), name) in replaced:
            replaced[(id(self), name)] = value
            return
        old = dict.get(self, name)
        if isinstance(old, DistributedVariable) and isinstance(value, torch.Tensor):
            env = _replica_env()
            if env is not None:
                if _write_in_replica(old, value, env, name):
                    return
            elif not isinstance(value, torch.nn.Parameter) and value.shape == old._components[0].shape:
                old.data = value
                return
        dict.__setitem__(self, name, value)


class ReplicaAwareParameters(ReplicaAwareDict):
    """A module's ``_parameters``, which also keeps a module buffer's variable out. Distributed
    variables are ``Parameter``s, so torch's ``Module.__setattr__`` registers one assigned to a module
    as a parameter: ``SyncBatchNorm.convert_sync_batchnorm`` (``new.running_mean = old.running_mean``)
    would list the running statistics in ``model.parameters()``, where no DDP program sees them (an
    optimizer, ``requires_grad_(True)``, parameter counts). ``_on_parameter`` registers such a variable
    as the module's buffer instead, and this dict drops it."""

    __slots__ = ()

    def __setitem__(self, name: str, value: Any) -> None:
        if _is_distributed(value) and value._module_buffer:
            return
        ReplicaAwareDict.__setitem__(self, name, value)


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


def _replica_copy(values: ReplicaAwareDict, memo: dict, replica_id: int) -> dict:
    """A plain dict of the replica's own copies: ``learner = deepcopy(model)`` per task in the step
    (Reptile, first-order MAML) is each DDP rank's local module, its inner optimizer's updates its own.
    A new distributed variable per replica instead had its gradients summed with the other replicas'
    learners' and its update applied to one replica's copy (0.003-0.013 off DDP's weights, silently)."""
    new: dict = {}
    memo[id(values)] = new
    for name, value in dict.items(values):
        if _is_distributed(value) and id(value) not in memo:   # tied weights stay one tensor (the memo)
            with torch.no_grad():
                own = value._components[replica_id].detach().clone()
            if isinstance(values, ReplicaAwareParameters):
                own = torch.nn.Parameter(own, requires_grad=value.requires_grad)
            _note_built_in_replica(own)
            memo[id(value)] = own
        new[name] = copy.deepcopy(value, memo)
    return new


def _write_in_replica(old: DistributedVariable, value: torch.Tensor, env: Any, name: str) -> bool:
    """``module.<name> = value`` inside ``strategy.run`` over a distributed variable; True when done.

    The module object is shared by every replica, so replacing the variable in its dict would hand
    every replica this one's tensor (a half-mirrored model). The replica's own copy written back
    (``self._u = F.normalize(..., out=self._u)``, as ``parametrizations.spectral_norm`` does each
    forward) is already in place; a new value for a buffer (sync-on-read: each replica keeps its own)
    forward) is already in place; a new plain tensor of the same shape goes into the replica's copy
    (``self.count += 1`` hands back the replica's own tensor, as ``AveragedModel.update_parameters``
    does with ``n_averaged``; DDP's ranks each write their own); anything else (a Parameter, another
    shape) is refused with several replicas."""
    own = old._components[env.replica_id]
    if value is own or value is old:
        return True
    if not isinstance(value, torch.nn.Parameter) and value.shape == own.shape:
        with torch.no_grad():
            own.copy_(value)
        return True
    if env.strategy.extended.num_local_replicas == 1:
        return False
    raise ValueError(
        f"Assigning a new tensor to {name!r} inside {type(env.strategy).__name__}.run would replace the "
        f"distributed variable {old._md_name!r} of a module that all {env.strategy.num_replicas_in_sync} replicas "
        f"share. Update it in place instead ({name}.copy_(new), or out={name}), or make the change outside "
        "strategy.run.")


def _make_replica_aware(module: torch.nn.Module, attribute: str) -> None:
    current = module.__dict__[attribute]
    kind = ReplicaAwareParameters if attribute == "_parameters" else ReplicaAwareDict
    if type(current) is not kind:
        module.__dict__[attribute] = kind(current)
