"""Lazy modules (``torch.nn.LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm1d``, any ``LazyModuleMixin``)
built in a distributing strategy's scope: mirrored when their first forward pass materializes them.

A lazy module's parameters are ``UninitializedParameter``s until its first forward pass gives them a
shape, so they cannot become distributed variables when they are registered (``module_hooks``). They
stay plain and pending; the module's own materializing forward pre-hook (``_infer_parameters``,
which torch removes after it ran once) is wrapped so that, right after torch materialized and
initialized them, they are replaced by distributed variables made from those values:

* a forward pass in cross-replica context (a dry run on a sample batch, inside the scope or outside
  it, as torch's and DDP's documentation ask before wrapping or building the optimizer) runs on the
  plain materialized tensors, as on one device, and mirrors them when the module's call returns (a
  forward hook, also called if the forward raises), so a LazyBatchNorm's running statistics hold the
  dry run's batch on every replica, as on every DDP rank;
* a first forward pass inside ``strategy.run`` does it once, in a ``merge_call`` (every replica waits;
  replica 0's inputs give the shapes, the device's generator the initial values, as a dry run
  outside would), and every replica continues with the mirrored variables; refused across several
  workers (their first values would differ for a step), where a dry run is needed first.

The tensors that were pending are remembered (by id, weakly): an optimizer built over them before the
first forward pass holds tensors no replica trains, so its step is refused (``refuse_stale``) with
the fix: a dry run before creating the optimizer.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any, Callable

import torch

from multidev.values import context
from multidev.values.distributed import local_value
from multidev.values.variables import DistributedVariable

#: id(tensor) -> (weak reference, "LazyLinear.weight") for every uninitialized tensor registered in a
#: distributing scope, pending or already replaced by its variable; an entry leaves with its tensor.
_lazy: dict[int, tuple[weakref.ref, str]] = {}


def _note(tensor: torch.Tensor, where: str) -> None:
    key = id(tensor)
    ref = weakref.ref(tensor, lambda r: _lazy.get(key, (None,))[0] is r and _lazy.pop(key, None))
    _lazy[key] = (ref, where)


def _noted(tensor: Any) -> str | None:
    entry = _lazy.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else None


def defer(module: torch.nn.Module, name: str, tensor: torch.Tensor, strategy: Any,
          make_replica_aware: Callable[[torch.nn.Module, str], None]) -> None:
    """Keep ``module``'s uninitialized ``name`` plain until its first forward pass (see the module
    docstring); ``ValueError`` for an uninitialized tensor in a module that is no lazy module."""
    _note(tensor, f"{type(module).__name__}.{name}")
    handle = module.__dict__.get("_initialize_hook")
    hooks = module._forward_pre_hooks
    if handle is None or handle.id not in hooks:
        raise ValueError(
            f"{type(module).__name__}.{name} is an uninitialized {type(tensor).__name__}, but "
            f"{type(module).__name__} is not a torch.nn.modules.lazy.LazyModuleMixin whose first forward pass "
            f"materializes it, so {type(strategy).__name__}.scope() cannot mirror it. Materialize it before "
            "registering it in the scope.")
    if not isinstance(hooks[handle.id], _MirrorAfterMaterializing):
        hooks[handle.id] = _MirrorAfterMaterializing(hooks[handle.id], strategy, make_replica_aware)


class _MirrorAfterMaterializing:
    """Stands in for torch's ``_infer_parameters`` forward pre-hook (same id, same kwargs flag): runs it,
    then replaces the materialized tensors by distributed variables of ``strategy``."""

    def __init__(self, infer: Callable, strategy: Any, make_replica_aware: Callable[[torch.nn.Module, str], None]):
        self._infer = infer
        self._strategy = strategy
        self._make_replica_aware = make_replica_aware

    def __deepcopy__(self, memo: dict) -> "_MirrorAfterMaterializing":
        """A copy of a module not materialized yet mirrors into the same strategy (never copied)."""
        return _MirrorAfterMaterializing(copy.deepcopy(self._infer, memo), self._strategy, self._make_replica_aware)

    def __call__(self, module: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> None:
        ctx = context.current_replica_context()
        if ctx is None:   # a dry run: on the plain tensors, as on one device, then mirrored (after the call)
            if self._materialize(module, args, kwargs):
                def after_call(m: torch.nn.Module, call_args: Any, output: Any) -> None:
                    handle.remove()
                    self._mirror(m)
                handle = module.register_forward_hook(after_call, always_call=True)
            return None
        if self._strategy.extended.num_workers > 1:
            raise ValueError(
                f"{type(module).__name__} (a lazy module built in {type(self._strategy).__name__}.scope()) has its "
                "first forward pass inside strategy.run, on several workers whose initial values would differ. "
                "Run one forward pass on a sample batch in the scope (model(sample_batch)) before creating the "
                "optimizer and calling strategy.run.")
        ctx.merge_call(_materialize_once, args=(self, module, args, kwargs))
        return None

    def _materialize(self, module: torch.nn.Module, args: tuple, kwargs: dict | None) -> bool:
        """torch's materialization (cross-replica context); False when it already ran."""
        if "_initialize_hook" not in module.__dict__:
            return False
        self._infer(module, args, kwargs)
        return True

    def _mirror(self, module: torch.nn.Module) -> None:
        """Every pending tensor of ``module`` becomes a distributed variable with its current value (a
        dry run's batch statistics included, as every DDP rank ran it)."""
        made = []
        for attribute, create in (("_parameters", "create_variable_from_parameter"),
                                  ("_buffers", "create_variable_from_buffer")):
            for name, value in list(dict.items(module.__dict__[attribute])):
                if value is None or isinstance(value, DistributedVariable):
                    continue   # (the module was built in the scope: all its tensors are the strategy's)
                var = getattr(self._strategy.extended, create)(module, name, value)
                self._make_replica_aware(module, attribute)
                dict.__setitem__(module.__dict__[attribute], name, var)
                made.append(var)
        if made:
            self._strategy.extended.hook_new_variables()


def _materialize_once(strategy: Any, hook: _MirrorAfterMaterializing, module: torch.nn.Module, args: Any,
                      kwargs: Any) -> None:
    """merge_call half of a lazy module's first forward inside ``strategy.run``: replica 0's inputs."""
    hook, module, args, kwargs = local_value((hook, module, args, kwargs), 0)
    if hook._materialize(module, args, kwargs):
        hook._mirror(module)


def refuse_stale(optimizer: torch.optim.Optimizer, params: list) -> None:
    """``ValueError`` when ``optimizer`` holds a lazy module's tensor from before its first forward pass
    (uninitialized, or since replaced by a distributed variable): no replica would train it."""
    if not _lazy:
        return
    stale = [where for where in (_noted(p) for p in params) if where is not None]
    if stale:
        raise ValueError(
            f"{type(optimizer).__name__} was created over the parameters {stale!r} of lazy modules before their first "
            "forward pass (which, for a module built in a strategy's scope, replaces them with mirrored variables): "
            "it would train tensors no replica uses. Run one forward pass on a sample batch in the scope (model(sample_batch)) "
            "before creating the optimizer and calling strategy.run, then create it over model.parameters().")
