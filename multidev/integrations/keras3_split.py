"""Keras 3 optimizers on the update engine (``distribute/replica_update``): which may split, their slots,
and the Keras-side pieces of ``keras3._apply`` (build once, apply the sums, a loss-scale optimizer).

On replicas that share one CPU the engine splits an element-wise update (``replica_update.SplitPlan``):
each variable's owner sums its gradients, runs Keras's own ``apply`` on its variables only (so Keras's
update rule, weight decay, constraints and clipping by value or norm run once per variable), then
copies the new values **and** those variables' optimizer slots (momentum, velocity: the variables
Keras made with ``add_variable_from_reference``, recorded here) into the other replicas' copies.
Optimizer state therefore stays mirrored, so ``optimizer.variables``, saving and a later all-reduce
step read the same state as one device. Every replica still counts ``iterations`` (and Nadam's
``u_product``) itself, so a step where some replica owns no variable with a gradient gives every
replica every sum (``idle_fallback``).

Split only where it is exact and a known rule: Keras's built-in element-wise optimizers
(``SPLIT_OPTIMIZERS``, registered into the engine's one element-wise registry by ``keras3``) without
``global_clipnorm`` (needs every gradient), gradient accumulation or EMA, every slot distributed and at
least one variable per replica. Anything else (GPUs, workers, another optimizer) is summed in buckets
and applied by every replica to its own copies.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Sequence

import torch

from multidev.distribute import replica_update
from multidev.values import context
from multidev.values.variables import DistributedVariable

SPLIT_OPTIMIZERS = ("SGD", "Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Lion")
_slots: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()  # optimizer -> {id(ref): [slot]}
_plans: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()  # optimizer -> (key, plan)
_adopted: "weakref.WeakSet[Any]" = weakref.WeakSet()  # optimizers whose variables are all distributed
_lock = threading.Lock()


def add_variable_from_reference(original: Any, optimizer: Any, reference_variable: Any, *args: Any, **kwargs: Any) -> Any:
    """``Optimizer.add_variable_from_reference`` (public): remember which slot belongs to which variable."""
    slot = original(optimizer, reference_variable, *args, **kwargs)
    with _lock:
        _slots.setdefault(optimizer, {}).setdefault(id(reference_variable), []).append(slot)
    return slot


def _eligible(optimizer: Any) -> bool:
    """Keras's options that need every gradient (or more than one step) before the update: no split."""
    return not optimizer.global_clipnorm and not optimizer.gradient_accumulation_steps and not optimizer.use_ema


def _make_plan(optimizer: Any, variables: Sequence[Any], strategy: Any, eligible: bool) -> replica_update.UpdatePlan:
    params = [v._value for v in variables]
    recorded = _slots.get(optimizer, {})
    slots = [[s._value for s in recorded.get(id(v), [])] for v in variables]
    splits = (eligible and replica_update.is_elementwise(optimizer) and len(variables) >= strategy.num_replicas_in_sync
              and all(isinstance(s, DistributedVariable) for group in slots for s in group))
    return replica_update.choose(params, strategy, elementwise=splits, extra=slots, idle_fallback=True)


def plan_for(optimizer: Any, variables: Sequence[Any], strategy: Any, adopt: Any = None) -> replica_update.UpdatePlan:
    """The cached update plan of ``optimizer`` over ``variables`` (Keras variables) on ``strategy``. In
    replica context, with ``adopt`` (``keras3``'s distribute function), the optimizer's variables made
    outside the scope are distributed first, once (``adopt_optimizer``, in a ``merge_call``)."""
    if adopt is not None and optimizer not in _adopted:   # one step counter every replica would increment
        context.current_replica_context().merge_call(adopt_optimizer, args=(optimizer, adopt))
    eligible = _eligible(optimizer)
    key = (tuple(id(v) for v in variables), eligible)
    cached = _plans.get(optimizer)
    if cached is None or cached[0] != key:
        with _lock:
            cached = _plans.get(optimizer)
            if cached is None or cached[0] != key:
                cached = (key, _make_plan(optimizer, variables, strategy, eligible))
                _plans[optimizer] = cached
    return cached[1]


def build_optimizer(strategy: Any, optimizer: Any, variables: Any) -> None:
    """Build ``optimizer`` for ``variables`` once, in cross-replica context (its slots are distributed).
    Every replica passes the same variables (regroup keeps identical objects as they are)."""
    if not optimizer.built:
        optimizer.build(variables)


def apply_sums(original: Any, optimizer: Any, variables: list, sums: tuple) -> None:
    """Keras's own ``apply`` on the variables this replica updates (those with a sum)."""
    mine = [i for i, g in enumerate(sums) if g is not None]
    with torch.no_grad():
        if len(mine) == len(sums):
            original(optimizer, list(sums), variables)
        else:
            original(optimizer, [sums[i] for i in mine], [variables[i] for i in mine])


def adopt_optimizer(strategy: Any, optimizer: Any, distribute: Any) -> None:
    """Distribute the variables an optimizer made before it met ``strategy`` (``iterations``, ``learning_rate``
    and a loss-scale optimizer's scale and counter come from ``__init__``: an optimizer created outside the
    scope and compiled in it, as in ``compile(optimizer=opt)`` inside ``with strategy.scope()``). One plain copy
    incremented by every replica would count each step once per replica (Adam's bias correction, schedules and
    ``.keras`` files then see N times the steps). Cross-replica context, once per optimizer; ``distribute(strategy,
    variable)`` is ``keras3``'s (the slots ``build_optimizer`` makes later are created in the strategy)."""
    for variable in optimizer.variables:
        if not isinstance(variable._value, DistributedVariable):
            variable._value = distribute(strategy, variable)
    _adopted.add(optimizer)


def apply_loss_scaled(distribute: Any, original: Any, optimizer: Any, grads: Any, trainable_variables: Any = None) -> Any:
    """``LossScaleOptimizer.apply`` inside ``strategy.run``: built once and its variables adopted
    (``adopt_optimizer``) in cross-replica context; nothing is summed here: its finite check agrees across
    replicas (``finite_everywhere``) and its inner optimizer's ``apply`` sums the unscaled gradients
    (``keras3._apply``; the scale is a power of two, so unscaling first is exact)."""
    ctx = context.current_replica_context()
    if ctx is not None and ctx.num_replicas_in_sync > 1:
        if not optimizer.built:
            ctx.merge_call(build_optimizer, args=(optimizer, list(trainable_variables or ())))
        if optimizer not in _adopted:
            ctx.merge_call(adopt_optimizer, args=(optimizer, distribute))
    return original(optimizer, grads, trainable_variables)


def finite_everywhere(original: Any, optimizer: Any, grads: Any) -> Any:
    """``LossScaleOptimizer.check_finite`` inside ``strategy.run``: finite only where every replica's gradients
    are, so every replica takes the same branch (one scalar all-reduce)."""
    finite = original(optimizer, grads)
    ctx = context.current_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return finite
    count = ctx.all_reduce("SUM", torch.as_tensor(finite).to(torch.float32).reshape(()))
    return count >= ctx.num_replicas_in_sync
