"""Gradients ``loss.backward()`` reduced, then changed differently on each replica before ``optimizer.step()``.

DDP's ranks each apply their own ``.grad``: a correction a program adds after ``backward`` from its own
batch (a Hessian-vector product of the local loss, ``p.grad.sub_(rho * hv)``; noise from a generator seeded
per rank) makes the ranks drift apart, silently. Multidev's replicas hold one set of weights: a split update
applied each variable's owner replica's gradient and published it, so the weights took replica 0's
correction for some variables and replica 1's for others, silently (0.5 x an HVP: every copy equal, neither
rank's result). In a step function's first runs (those ``shared_leaves`` watches) ``optimizer.step()``
meets the other local replicas and compares their gradients of every variable (to the rounding of the
sum in another order: a change every replica makes alike, ``clip_grad_norm_``, noise drawn from generators
seeded alike, passes) and refuses a difference before any update. Later runs are not compared (the
step's structure is the first run's).
Gradients set by hand with no backward (``LocalGrads``) are summed by the step instead and not compared;
replicas of other workers are not compared (each worker applies its own, as each rank). The weights' local
copies are compared here too, before the update (``first_run_agreement``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import DisableTorchFunctionSubclass

from multidev.distribute import first_run_agreement, shared_leaves
from multidev.values.variables import DistributedVariable
from multidev.values.gradients import SummedGrads


def refuse_diverged(optimizer: torch.optim.Optimizer, engine: Any, env: Any) -> None:
    """``ValueError`` when the local replicas' reduced gradients differ (first runs of a step function)."""
    refs = engine.refs
    if len(refs) == 1 or env.replica_step.gradients is not SummedGrads or not shared_leaves.watched(env.strategy):
        return
    group = env.strategy.extended.replica_group
    group.barrier(env.replica_id, "optimizer.step.reduced_grads")   # every replica's gradients are final
    try:
        _refuse_apart_weights(engine)
        for i, var in enumerate(engine.params):
            grads = [copies[i].grad for copies in refs]
            for k, g in enumerate(grads[1:], 1):
                if not _same(grads[0], g, len(refs)):
                    raise _diverged(optimizer, env, var, k)
    finally:   # nobody steps (and zeroes its gradients) while another replica still reads them
        group.barrier(env.replica_id, "optimizer.step.reduced_grads.compared")


def _refuse_apart_weights(engine: Any) -> None:
    """The weights' copies must be equal before the update (``first_run_agreement``: a write through ``.data``
    from each replica's batch, Glow's ActNorm initialisation, which the owner's update would overwrite)."""
    apart = []
    with torch.no_grad(), DisableTorchFunctionSubclass():
        for i, var in enumerate(engine.params):
            if not _must_agree(var):
                continue
            first = engine.refs[0][i]
            differ = [k for k, copies in enumerate(engine.refs[1:], 1)
                      if copies[i] is not first and not first_run_agreement.same(copies[i], first)]
            if differ:
                apart.append((var, differ[0]))
    if apart:
        raise first_run_agreement.refused(apart, "before optimizer.step() updates it")


def _must_agree(var: Any) -> bool:
    """A distributed weight whose copies must be equal (aggregation NONE lets them drift by design)."""
    return isinstance(var, DistributedVariable) and var._copies_must_agree() and not var._own_updates


def _same(a: torch.Tensor | None, b: torch.Tensor | None, n: int) -> bool:
    """Equal up to the rounding of an ``n``-term sum taken in another order (a collective that sums in
    each replica's own order), which a per-replica correction exceeds by far."""
    if a is None or b is None:
        return a is b
    if a is b or a.is_sparse or b.is_sparse or torch.equal(a, b):
        return True
    if a.shape != b.shape or a.dtype != b.dtype or not a.is_floating_point():
        return False
    scale = torch.maximum(a.abs().max(), b.abs().max())
    return bool((a - b).abs().max() <= 64 * n * torch.finfo(a.dtype).eps * scale)


def _diverged(optimizer: torch.optim.Optimizer, env: Any, var: Any, k: int) -> ValueError:
    strategy = type(env.strategy).__name__
    return ValueError(
        f"{type(optimizer).__name__}.step() inside {strategy}.run: the gradient of "
        f"{getattr(var, 'name', 'a variable')!r}, "
        f"which loss.backward() reduced across replicas, was changed afterwards differently on replica {k} than on "
        "replica 0 (a correction computed from the replica's own batch, as a Hessian-vector product of its loss: "
        "`p.grad.sub_(rho * hv)`). Under DDP each rank would apply its own gradient and the ranks would drift apart; "
        "the replicas hold one set of weights. Reduce the correction first "
        "(`hv = md.distribute.get_replica_context().all_reduce('mean', hv)`; DDP: `dist.all_reduce(hv); hv /= "
        "world_size`), or compute it from reduced values. (Checked in a step function's first runs.)")
