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
or its class. Outside ``strategy.run`` the dict answers exactly as torch's does (the dicts:
``replica_dicts.py``). A variable marked
``_handed_whole`` (a Keras layer's state weight, written with ``assign_add`` in ``call``) is handed
out whole in replicas too: its ops pay the variable's ``__torch_function__``, its writes aggregate.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable, Iterator

import torch
from torch.nn.modules import module as torch_module
from torch.nn.parameter import is_lazy
from torch.utils.hooks import RemovableHandle

from multidev.values import context
from multidev.distribute import lazy_modules, scripted_modules, shared_buffers, sync_batch_norm
from multidev.distribute.replica_dicts import (REPLACED, ReplicaAwareDict, ReplicaAwareParameters,  # noqa: F401
                                               _is_built_in_replica, _is_distributed, _make_replica_aware,
                                               _note_built_in_replica)
from multidev.values.variables import DistributedVariable


_replica_env = context.replica_env
_compiling = torch.compiler.is_compiling


def _distributing_strategy() -> Any | None:
    if context.current_replica_id() is not None:
        return None  # modules built inside a replica function stay local to it
    strategy = context.current_scope_strategy()
    if strategy is None or not strategy.extended.distributes_variables:
        return None
    return strategy


def _distribute(module: torch.nn.Module, name: str, tensor: Any, attribute: str, create: str) -> tuple[Any, bool]:
    """The distributed variable replacing ``tensor`` (None: keep it), made by ``extended.<create>``, and
    whether a distributing strategy's scope took it (a lazy module's uninitialized tensor waits for its
    first forward pass: ``lazy_modules``)."""
    if isinstance(tensor, DistributedVariable):
        _adopt_assigned(module, attribute)
        return None, True
    strategy = _distributing_strategy()
    if strategy is None:
        return None, False
    sync_batch_norm.adopt(module)   # also one with no parameters or buffers (affine=False, no running stats)
    if tensor is None:
        return None, True
    if is_lazy(tensor):
        lazy_modules.defer(module, name, tensor, strategy, _make_replica_aware)
        return None, True
    if tensor.is_meta:   # a placeholder (Hugging Face's from_pretrained builds on "meta"): its value, set later
        _on_meta.add(module)   # with setattr, comes through this hook again and is distributed then
        return None, True
    var = getattr(strategy.extended, create)(module, name, tensor)
    _keep_attributes(tensor, var)
    _make_replica_aware(module, attribute)
    return var, True


def _keep_attributes(tensor: torch.Tensor, var: DistributedVariable) -> None:
    """The Python attributes a library set on the tensor it registered stay readable on what replaces
    it (the variable, and each replica's copy inside ``strategy.run``), as on the one parameter DDP
    keeps: Hugging Face's ``from_pretrained`` marks each loaded weight ``_is_hf_initialized`` and
    re-initialises every weight without it. Never over the variable's own state or its class's
    attributes (a tensor's ``name`` is not the variable's TensorFlow name)."""
    for key, value in vars(tensor).items():
        if key in vars(var) or hasattr(type(var), key):
            continue
        setattr(var, key, value)
        for component in var._components:
            if component is not var and key not in vars(component) and not hasattr(type(component), key):
                setattr(component, key, value)


def _adopt_assigned(module: torch.nn.Module, attribute: str) -> None:
    """A distributed variable assigned to a module outside ``strategy.run`` (tied weights,
    ``convert_sync_batchnorm`` outside the scope copying the variables into a new SyncBatchNorm):
    replica-aware dicts, and a SyncBatchNorm synchronising over the variable's replicas."""
    if context.current_replica_id() is None:
        _make_replica_aware(module, attribute)
        sync_batch_norm.adopt(module)


def _on_parameter(module: torch.nn.Module, name: str, param: Any) -> Any:
    _seen.add(module)
    in_replica = context.current_replica_id() is not None
    if not in_replica and _is_distributed(param) and param._module_buffer:   # a buffer moved between modules
        _make_replica_aware(module, "_parameters")   # (which drops it: ReplicaAwareParameters)
        module.register_buffer(name, param)
        return None
    if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.max_norm is not None:
        _refuse_renormalising(module)
    strategy = context.current_scope_strategy()
    if strategy is not None and not in_replica and not is_lazy(param) and not isinstance(param, DistributedVariable):
        placed = strategy.extended.place_parameter(param)   # parameter servers: a variable there
        if placed is not None:
            return placed
        if strategy.extended.place_value(param):   # other non-distributing strategies only move it (in place)
            return None
    var, taken = _distribute(module, name, param, "_parameters", "create_variable_from_parameter")
    if not taken:
        if in_replica:
            shared_buffers.note_registration(module)
            _note_built_in_replica(param)   # the replica's own module: not shared with the others
        else:
            _unscoped.add(module)
    return var


def _refuse_renormalising(module: torch.nn.Module) -> None:
    """``nn.Embedding(max_norm=...)`` (or ``EmbeddingBag``'s) made in the scope of several replicas in
    sync: its forward writes the weight (``embedding_renorm_`` of the rows the batch looks up), so
    inside ``strategy.run`` each replica would rescale other rows of its own copy, which the next
    optimizer step hides within a process and leaves apart across workers. Refused when built (its
    ``max_norm`` is set before its weight), with the fix."""
    strategy = _distributing_strategy()
    if strategy is None or strategy.num_replicas_in_sync == 1:
        return
    raise ValueError(
        f"nn.{type(module).__name__}(max_norm={module.max_norm!r}) built in {type(strategy).__name__}.scope() "
        f"({strategy.num_replicas_in_sync} replicas): its forward renormalises the rows its batch looks up in "
        "place in the weight, so inside strategy.run each replica would rescale other rows of its own copy (DDP's "
        "ranks drift apart alike). Build it with max_norm=None and bound the rows between steps, outside "
        "strategy.run: `with torch.no_grad(): emb.weight.copy_(torch.renorm(emb.weight, 2, 0, "
        f"{module.max_norm!r}))` (every replica's copy follows).")


# --- a module built outside strategy.scope() and called by several replicas ------------------------
#: Modules given a plain parameter outside a distributing scope and outside replicas: one object whose
#: parameters every replica would share (training them concurrently races and can crash the process).
#: Only while a strategy lives (its hooks see them): a module built before any strategy is not in it.
_unscoped: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
#: Modules that registered a parameter while a strategy lived (the hooks saw them): a module not in it
#: with plain parameters was built before any strategy existed.
_seen: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


#: Modules that registered a meta-device placeholder in a distributing scope: their values must come
#: through the registration hooks (setattr, ``load_state_dict(assign=True)``), not ``Module.to_empty``,
#: which writes ``_parameters`` directly (``_refuse_shared`` says so).
_on_meta: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def refuse_shared_parameters(optimizer: torch.optim.Optimizer, params: list | None = None,
                             closure: bool = False) -> None:
    """Inside a run of several local replicas of a distributing strategy: ``optimizer.step()`` over
    plain tensors that no replica built (a module built before any strategy existed, which no hook
    saw; a tensor outside any module) would have every replica update one set of parameters:
    ``ValueError`` before any update. ``params``: the optimizer's plain tensors, where known;
    ``closure``: the step evaluates a closure (LBFGS: no ``.grad`` yet, the closure's backward makes it)."""
    env = _replica_env()
    if env is None or env.strategy.extended.num_local_replicas == 1 or not env.strategy.extended.distributes_variables:
        return
    if params is None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
    shared = [p for p in params
              if isinstance(p, torch.Tensor) and p.requires_grad and (closure or p.grad is not None)
              and not isinstance(p, DistributedVariable) and not _is_built_in_replica(p)]
    if shared:
        strategy = type(env.strategy).__name__
        shapes = [tuple(p.shape) for p in shared[:3]]
        raise ValueError(
            f"{type(optimizer).__name__}.step() inside {strategy}.run would update tensors (shapes {shapes}"
            f"{' ...' if len(shared) > 3 else ''}) that are not mirrored: parameters of a module built outside "
            f"{strategy}.scope(), or tensors outside any torch.nn.Module (a bare nn.Parameter or "
            "`torch.randn(..., requires_grad=True)`, even in the scope). One such tensor is shared by all "
            f"{env.strategy.num_replicas_in_sync} replicas, whose backward passes add into its one .grad and whose "
            "updates race. Build the model and its optimizer inside `with strategy.scope():` (after creating the "
            "strategy), and make a free-standing weight an md.Variable(...) created in the scope, or an attribute "
            "of a torch.nn.Module built there.")


def _refuse_shared(module: torch.nn.Module, args: Any) -> None:
    """Global forward pre-hook during runs of several replicas (``shared_module_guard``); not while
    torch.compile traces (the ContextVar and weak sets would be graph breaks)."""
    if _compiling():
        return
    env = _replica_env()
    if env is None:
        return
    if isinstance(module, torch.jit.ScriptModule):
        scripted_modules.refuse_forward(module, env)
    shared_buffers.note_module(module, env)   # its buffers, written in place by the step (refused after the run)
    if type(module) is torch.nn.SyncBatchNorm and module.training:
        _refuse_unsynchronised(module, env)
    if (module in _seen and module not in _unscoped and module not in _on_meta) or not torch.is_grad_enabled():
        return
    held, replaced = module._parameters, REPLACED.get() or {}   # a functional_call's tensors are the replica's
    plain = [n for n, p in dict.items(held) if p is not None and p.requires_grad and not _is_distributed(p)
             and not _is_built_in_replica(p) and (id(held), n) not in replaced]
    if plain and module in _on_meta:
        _refuse_materialised(module, plain, env)
    if plain:
        strategy = type(env.strategy).__name__
        mirrored = [n for n, p in dict.items(held) if p is not None and _is_distributed(p)]
        what = (f"{type(module).__name__}'s parameters {plain!r} were assigned outside {strategy}.scope() (its "
                f"{mirrored!r} were made in it: `layer.weight = nn.Parameter(value)` after the scope)" if mirrored else
                f"{type(module).__name__} (parameters {plain!r}) was built outside {strategy}.scope()")
        raise ValueError(
            f"{what}, so its one set of parameters would be shared by all {env.strategy.num_replicas_in_sync} "
            "replicas of strategy.run (their backward passes would race on its .grad, their updates on its values). "
            "Build the model and its optimizer inside `with strategy.scope():` (a parameter replaced later too, or "
            "copy the new value into the existing one: `with torch.no_grad(): layer.weight.copy_(value)`; or, if "
            "it is only read, freeze it with requires_grad_(False) or call it under torch.no_grad()).")


def _refuse_materialised(module: torch.nn.Module, plain: list, env: Any) -> None:
    strategy = type(env.strategy).__name__
    raise ValueError(
        f"{type(module).__name__} (parameters {plain!r}) was built on the meta device in {strategy}.scope() and then "
        "given values that bypass torch's registration hooks (Module.to_empty()), so its one set of parameters "
        f"would be shared by all {env.strategy.num_replicas_in_sync} replicas. Give the values in the scope through "
        "setattr (module.weight = torch.nn.Parameter(value), as transformers' from_pretrained does) or "
        "model.load_state_dict(state_dict, assign=True), or build the model on a real device in the scope.")


def _refuse_unsynchronised(module: torch.nn.Module, env: Any) -> None:
    strategy = type(env.strategy).__name__
    raise ValueError(
        f"This torch.nn.SyncBatchNorm was neither created nor converted in {strategy}.scope(), so in training each "
        f"of the {env.strategy.num_replicas_in_sync} replicas of strategy.run would normalise its own slice alone "
        "(torch's SyncBatchNorm synchronises only over a torch.distributed process group). Build the model, or "
        "call torch.nn.SyncBatchNorm.convert_sync_batchnorm(model), inside `with strategy.scope():`.")


@contextlib.contextmanager
def shared_module_guard(strategy: Any) -> Iterator[shared_buffers.BufferWatch]:
    """Around a run of several local replicas: calling, with gradients enabled, a module whose
    parameters every replica would share (built outside the scope, or before any strategy existed,
    which no registration hook saw) raises ``ValueError`` at its forward, before any backward or update;
    so does a torch SyncBatchNorm in training that is not synchronised over the replicas. A global
    forward pre-hook, which puts every module call on torch's slow path (~3 us), so the runner uses it
    for each step function's first successful run only (``replica_run._FirstRuns``). Yields the run's
    ``shared_buffers.BufferWatch``: the caller refuses the buffers of shared modules the step wrote in place."""
    with shared_buffers.watching(strategy) as watch, _global_guard():
        yield watch


_GUARD = {"key": None, "users": 0}
_GUARD_LOCK = threading.Lock()


@contextlib.contextmanager
def _global_guard() -> Iterator[None]:
    """``_refuse_shared`` as a global forward pre-hook, under the same key in every guarded run: torch.compile
    guards on the global hooks' keys, and a new key at each first run of a step function (a fresh lambda per
    ``strategy.run``) recompiled a compiled model every run, up to dynamo's limit (with ``fullgraph=True`` a
    hard failure). Runs of several strategies' threads at once share the one entry."""
    hooks = torch_module._global_forward_pre_hooks
    with _GUARD_LOCK:
        if _GUARD["key"] is None:
            _GUARD["key"] = RemovableHandle(hooks).id   # a key of torch's own numbering, never reused
        if _GUARD["users"] == 0:
            hooks[_GUARD["key"]] = _refuse_shared
        _GUARD["users"] += 1
    try:
        yield
    finally:
        with _GUARD_LOCK:
            _GUARD["users"] -= 1
            if _GUARD["users"] == 0:
                hooks.pop(_GUARD["key"], None)


def _on_buffer(module: torch.nn.Module, name: str, buffer: Any) -> Any:
    env = _replica_env()
    if env is not None:
        shared_buffers.check_buffer_write(module, name, buffer, env)
    elif isinstance(buffer, torch.Tensor) and not isinstance(buffer, DistributedVariable) and not is_lazy(buffer):
        strategy = context.current_scope_strategy()
        if strategy is not None and strategy.extended.place_value(buffer):   # OneDeviceStrategy: with its parameters
            return None
    var = _distribute(module, name, buffer, "_buffers", "create_variable_from_buffer")[0]
    if var is not None:
        var._module_buffer = True   # stays a buffer when assigned to another module (ReplicaAwareParameters)
    return var


def install() -> Callable[[], None]:
    """Register the global registration hooks (they act only inside a strategy's scope); returns how
    to remove them. ``live_hooks.STRATEGY_HOOKS`` calls both while strategies live."""
    handles = [torch_module.register_module_parameter_registration_hook(_on_parameter),
               torch_module.register_module_buffer_registration_hook(_on_buffer)]
    return lambda: [h.remove() for h in handles]
