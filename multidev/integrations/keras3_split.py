"""Keras 3 optimizers on replicas that share one CPU: each variable updated once, by its owner.

As md.keras's and torch's split update (``distribute/optimizer_shards.py``): every trainable
variable has one owner replica (bytes balanced, ``optimizer_shards.assign_owners``). Inside
``optimizer.apply`` the replicas exchange their gradient lists (no packing, no all-reduce); each
owner sums its variables' gradients in replica order, runs Keras's own ``apply`` on its variables
only (so Keras's update rule, weight decay, constraints and clipping by value or norm run once per
variable), then copies the new values **and** those variables' optimizer slots (momentum, velocity:
the variables Keras made with ``add_variable_from_reference``) into the other replicas' copies; a
barrier ends the step. Optimizer state therefore stays mirrored, so ``optimizer.variables``,
saving and a later all-reduce step read the same state as one device. When the gradients handed to
``apply`` are the replica copies' own ``.grad`` (Keras's fit step here, or a custom loop passing
``v.value.grad``), the owner sums into them in place (as DDP does, no allocation a step): after
``apply`` an owned variable's ``.grad`` holds the summed gradient, the others their replica's. Every replica still counts
``iterations`` (and Nadam's ``u_product``) itself, as it did before.

Used only where it is exact and a known rule: Keras's built-in element-wise optimizers (SGD, Adam,
AdamW, Adamax, Nadam, RMSprop, Adagrad, Adadelta, Lion) on replicas of one process on one CPU,
without ``global_clipnorm`` (needs every gradient), gradient accumulation or EMA, every variable
and slot distributed, and every replica owning a variable with a gradient. Anything else (GPUs,
workers, ``LossScaleOptimizer``, another optimizer) keeps the all-reduce path in ``keras3._apply``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Sequence

import torch

from multidev.distribute import gradient_reducer
from multidev.distribute.optimizer_shards import assign_owners
from multidev.values.variables import DistributedVariable

SPLIT_OPTIMIZERS = ("SGD", "Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Lion")
_slots: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()  # optimizer -> {id(ref): [slot]}
_plans: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()  # optimizer -> (key, plan)
_lock = threading.Lock()


def add_variable_from_reference(original: Any, optimizer: Any, reference_variable: Any, *args: Any, **kwargs: Any) -> Any:
    """``Optimizer.add_variable_from_reference`` (public): remember which slot belongs to which variable."""
    slot = original(optimizer, reference_variable, *args, **kwargs)
    with _lock:
        _slots.setdefault(optimizer, {}).setdefault(id(reference_variable), []).append(slot)
    return slot


class _Plan:
    """Who owns which variable, and each variable's slots (None: the split does not apply)."""

    def __init__(self, variables: Sequence[Any], slots: list, num_replicas: int):
        self.variables = list(variables)
        self.slots = slots
        owners = assign_owners([v._value for v in self.variables], num_replicas)
        self.owned = [[i for i, o in enumerate(owners) if o == r] for r in range(num_replicas)]


def _eligible(optimizer: Any, keras_classes: tuple) -> bool:
    return (type(optimizer) in keras_classes and not optimizer.global_clipnorm
            and not optimizer.gradient_accumulation_steps and not optimizer.use_ema)


def _make_plan(optimizer: Any, variables: Sequence[Any], num_replicas: int) -> _Plan | None:
    if len(variables) < num_replicas or not all(isinstance(v._value, DistributedVariable) for v in variables):
        return None
    recorded = _slots.get(optimizer, {})
    slots = [recorded.get(id(v), []) for v in variables]
    if not all(isinstance(s._value, DistributedVariable) for group in slots for s in group):
        return None
    return _Plan(variables, slots, num_replicas)


def plan_for(optimizer: Any, variables: Sequence[Any], strategy: Any, keras_classes: tuple) -> _Plan | None:
    """The cached split plan of ``optimizer`` over ``variables`` on ``strategy``, or None."""
    if not gradient_reducer.splits_own_update_rules(strategy) or not _eligible(optimizer, keras_classes):
        return None
    key = tuple(id(v) for v in variables)
    cached = _plans.get(optimizer)
    if cached is None or cached[0] != key:
        with _lock:
            cached = _plans.get(optimizer)
            if cached is None or cached[0] != key:
                cached = (key, _make_plan(optimizer, variables, strategy.num_replicas_in_sync))
                _plans[optimizer] = cached
    return cached[1]


def _summed(plan: _Plan, everyone: list, r: int, i: int) -> torch.Tensor | None:
    """Variable ``i``'s gradient summed over the replicas in replica order; in place into this
    replica's own ``.grad`` tensor when it is one (as DDP does), else into a new tensor."""
    grads = [g[i] for g in everyone if g[i] is not None]
    if not grads:
        return None
    mine = everyone[r][i]
    if mine is not None and mine is plan.variables[i]._value.values[r].grad:
        for k, g in enumerate(everyone):  # a + b == b + a: the same sum as in replica order for 2
            if k != r and g[i] is not None:
                mine.add_(g[i])
        return mine
    total = grads[0].clone() if len(grads) > 1 else grads[0]
    for g in grads[1:]:
        total.add_(g)
    return total


def apply(original: Any, optimizer: Any, ctx: Any, plan: _Plan, grads: list) -> bool:
    """This replica's part of a split ``optimizer.apply``; False (nothing done, every replica alike)
    when some replica owns no variable with a gradient: the caller then all-reduces."""
    r = ctx._global_replica_id
    everyone = gradient_reducer.exchange_among_replicas(ctx, "keras3.optimizer.apply", grads)
    present = [any(g[i] is not None for g in everyone) for i in range(len(grads))]
    if not all(any(present[i] for i in owned) for owned in plan.owned):
        return False
    mine = [i for i in plan.owned[r] if present[i]]
    with torch.no_grad():
        summed = [_summed(plan, everyone, r, i) for i in mine]
        original(optimizer, summed, [plan.variables[i] for i in mine])
        _publish(plan, mine, r)
    gradient_reducer.barrier(ctx, "keras3.optimizer.apply")
    return True


def _publish(plan: _Plan, indices: Sequence[int], r: int) -> None:
    """Copy this replica's updated variables and their slots into the other replicas' copies."""
    for i in indices:
        for holder in [plan.variables[i], *plan.slots[i]]:
            components = holder._value.values
            source = components[r]
            for k, target in enumerate(components):
                if k != r:
                    target.copy_(source)
