"""``torch.func.functional_call`` inside ``strategy.run``: the tensors it swaps in are the calling replica's.

``functional_call(model, params, x)`` (MAML's fast weights, torch.func's per-sample gradients over
``{k: v.detach() for k, v in model.named_parameters()}``, ``torch.autograd.functional.hvp`` over a
module's weights, ensembles over ``stack_module_state``) runs the module with other tensors in place of
its parameters and buffers: torch swaps them into the module's ``_parameters`` / ``_buffers`` dicts for
the call and swaps the originals back after it. The module is one object for every replica thread (each
DDP rank has its own), and multidev's replica-aware dicts took such a write for an in-place update of
the replica's copy (``replica_dicts._write_in_replica``): the swap copied the fast weights into the
weights and the restore left them there (silently: an HVP penalty trained 0.07 off DDP's weights), or
autograd refused the in-place write (MAML, ``vmap(grad(...))``). Outside replicas a swap over a
distributed variable wrote it too (``variable.data = tensor``): a MAML evaluation adapting outside
``strategy.run`` left the model holding its fast weights.

Inside a replica the swap now goes into this thread's ``replica_dicts.REPLACED`` (a ContextVar), which the
replica-aware dicts read before anything else: the module's dicts are never written, each replica sees
its own tensors for the duration of its call (nested calls stack), and a module that reassigns one of
them during the call (``self.x = t``) gives the new tensor back through the caller's dict, as torch
does. A module whose dicts are torch's own (built in a replica, or outside the scope) gets replica-aware
dicts first. Outside replicas the same holds for modules with distributed variables; torch's own swap
runs for the others. Cost: one global read per parameter read; while some thread is in such a call, a
ContextVar read too (about 30 ns).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import torch
from torch.nn.utils import stateless

from multidev.distribute import replica_dicts
from multidev.values.context import replica_env

_convert_lock = threading.Lock()   # two replicas converting one module's dict must end with one dict


def _count(change: int) -> None:
    """``replica_dicts.SWAPPING``: the dicts read ``REPLACED`` only while some call is running."""
    with _convert_lock:
        replica_dicts.SWAPPING += change


def _dict_of(module: torch.nn.Module, name: str) -> tuple[dict, str]:
    """The replica-aware dict (made so once) that holds ``name`` (``"block.0.weight"``), and its leaf name."""
    prefix, _, leaf = name.rpartition(".")
    owner = module.get_submodule(prefix) if prefix else module
    for attribute in ("_parameters", "_buffers"):
        held = owner.__dict__.get(attribute)
        if held is not None and dict.__contains__(held, leaf):
            if not isinstance(held, replica_dicts.ReplicaAwareDict):
                with _convert_lock:
                    replica_dicts._make_replica_aware(owner, attribute)
                held = owner.__dict__[attribute]
            return held, leaf
    raise ValueError(
        f"functional_call inside strategy.run (or over a module built in a strategy's scope) would set {name!r}, "
        f"which is no parameter or buffer of {type(owner).__name__}: the module is one object for all replicas, "
        "so such an attribute cannot be each replica's own. Pass only the module's parameters and buffers "
        "(module.named_parameters(), named_buffers()), or make the tensor a buffer (register_buffer).")


def _check_keys(module: torch.nn.Module, given: dict) -> None:
    """``strict=True``: torch's own message for missing or unexpected keys."""
    missing, unexpected = stateless.NamedMemberAccessor(module).check_keys(given)
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(), "\n\t".join(errors)))


@contextlib.contextmanager
def _in_replica(module: torch.nn.Module, parameters_and_buffers: dict, tie_weights: bool = False,
                strict: bool = False, stack_weights: bool = False) -> Iterator[None]:
    """torch's ``_reparametrize_module`` for the calling thread only (see the module docstring)."""
    given = stateless._untie_named_tensors_map(module, parameters_and_buffers) if tie_weights \
        else parameters_and_buffers
    if strict:
        _check_keys(module, given)
    keys = {}
    for name, tensor in given.items():
        held, leaf = _dict_of(module, name)
        if tensor is not dict.get(held, leaf):   # the variable itself: the replica's copy as without the call
            keys[name] = (id(held), leaf)
    outer = replica_dicts.REPLACED.get()
    replaced = dict(outer or {})
    replaced.update({key: given[name] for name, key in keys.items()})
    token = replica_dicts.REPLACED.set(replaced)
    _count(+1)
    try:
        yield
    finally:
        _count(-1)
        replica_dicts.REPLACED.reset(token)
        for key in outer or ():   # the enclosing call's tensors the module reassigned in this one
            outer[key] = replaced[key]
        # A module that reassigned a swapped tensor during the call: the caller's dict gets it (torch's rule).
        parameters_and_buffers.update({name: replaced[key] for name, key in keys.items()
                                       if name in parameters_and_buffers and replaced[key] is not given[name]})


def _holds_variables(module: torch.nn.Module) -> bool:
    """Whether ``module`` or a submodule has replica-aware dicts (distributed variables)."""
    return any(isinstance(m.__dict__.get(attribute), replica_dicts.ReplicaAwareDict)
               for m in module.modules() for attribute in ("_parameters", "_buffers"))


def _reparametrize(original: Callable) -> Callable:
    def reparametrize_module(module: torch.nn.Module, parameters_and_buffers: dict, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or (replica_env() is None and not _holds_variables(module)):
            return original(module, parameters_and_buffers, *args, **kwargs)
        return _in_replica(module, parameters_and_buffers, *args, **kwargs)
    reparametrize_module.__wrapped__ = original
    return reparametrize_module


def install() -> Callable[[], None]:
    """Wrap ``torch.nn.utils.stateless._reparametrize_module`` (what ``torch.func.functional_call`` and
    ``torch.nn.utils.stateless.functional_call`` swap through) while strategies live."""
    original = stateless._reparametrize_module
    stateless._reparametrize_module = _reparametrize(original)

    def remove() -> None:
        stateless._reparametrize_module = original
    return remove
