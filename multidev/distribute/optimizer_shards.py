"""Replicas that share one CPU split the optimizer update instead of each repeating it.

Logical CPU replicas of one process each hold a copy of every variable, in the same memory.
Summing every gradient on every replica and then applying the identical update N times would
cost N times the optimizer's work and memory traffic on the same cores. Instead (as ZeRO stage 1
does across GPUs) every variable has one owner replica, chosen once to balance bytes. Before the
step the owner sums the replicas' gradients of its variables, reading the other replicas'
gradient tensors directly (a reduce-scatter with no packing); the optimizer then updates only
the owned copies (the other gradients are released, so torch skips them); after the step the
owner copies its updated values into the other replicas' copies. Optimizer state exists once,
on the owner, and checkpoints see one canonical state.

Only for torch.optim optimizers whose update is element-wise per parameter: an optimizer that
looks across parameters (LBFGS, a user's optimizer) needs every gradient and keeps the plain
all-reduce path.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from multidev.values.variables import DistributedVariable

_ELEMENTWISE_NAMES = ("SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "Adadelta", "RMSprop",
                      "Rprop", "ASGD", "Adafactor")
# Exact types: a subclass may override step() with something that is not per-parameter.
ELEMENTWISE_OPTIMIZERS = {getattr(torch.optim, n) for n in _ELEMENTWISE_NAMES if hasattr(torch.optim, n)}


def register_elementwise(cls: type) -> type:
    """Declare ``cls`` (exactly that type, not its subclasses) an element-wise optimizer whose
    update replicas may split (e.g. the Keras update rules, ``multidev.keras.optimizers.rules``)."""
    ELEMENTWISE_OPTIMIZERS.add(cls)
    return cls


def can_shard(optimizer: torch.optim.Optimizer, extended: Any, num_replicas: int) -> bool:
    """Whether ``optimizer``'s update may be split across the replicas of ``extended``: replicas of
    one process on one CPU with their own copies, and an element-wise optimizer."""
    return (type(optimizer) in ELEMENTWISE_OPTIMIZERS and extended.replica_group.cooperative_reduce
            and not extended.replica_group.shared_storage and num_replicas == extended.replica_group.size)


def assign_owners(params: Sequence[Any], num_replicas: int) -> list[int]:
    """The owner replica of each parameter: largest first onto the least-loaded replica (by
    bytes). A plain tensor (one object every replica shares, created outside the scope) is not
    split: it reads as replica 0's, and the optimizer treats it as it did before."""
    owners = [0] * len(params)
    load = [0] * num_replicas
    distributed = [i for i, p in enumerate(params) if isinstance(p, DistributedVariable)]
    for i in sorted(distributed, key=lambda i: -params[i].numel() * params[i].element_size()):
        r = min(range(num_replicas), key=load.__getitem__)
        owners[i] = r
        load[r] += params[i].numel() * params[i].element_size()
    return owners


class OptimizerShards:
    """One optimizer's split update: who owns which parameter, and the reduce / publish steps.

    Ordering guarantee (what keeps an owner from writing a copy another replica still reads): an
    owner writes the other replicas' copies only in ``publish``, which runs after ``reduce``'s
    exchange (or, when ``loss.backward()`` already reduced the gradients, its barrier), which every
    replica enters only from its ``optimizer.step()``, after its backward pass and whatever it reads
    before the step (its gradients are
    final, its graph no longer reads the weights); and the step ends with a barrier after every
    replica's ``publish`` (``SplitUpdate.after_step``), so no replica starts its next forward pass
    (several steps in one ``strategy.run``) while an owner is still copying into its weights.
    ``tests/distribute/test_replica_race.py`` checks both, by value, under random delays."""

    def __init__(self, params: Sequence[Any], num_replicas: int):
        self.params = list(params)
        self.num_replicas = num_replicas
        owners = assign_owners(self.params, num_replicas)
        distributed = [isinstance(p, DistributedVariable) for p in self.params]
        self.owned = [[i for i, o in enumerate(owners) if o == r and distributed[i]] for r in range(num_replicas)]
        self.not_owned = [[i for i, o in enumerate(owners) if o != r and distributed[i]]
                          for r in range(num_replicas)]
        self._updated: list[list[int]] = [[] for _ in range(num_replicas)]
        self._released: list[list[tuple]] = [[] for _ in range(num_replicas)]   # (tensor, its reduced grad)

    def reduce(self, ctx: Any, replica_id: int, summed_already: bool) -> None:
        """Set this replica's gradients of its own parameters to their sums over all replicas, and
        release its gradients of the others' (the optimizer skips them). ``summed_already`` (every
        replica holds the reduced gradients, e.g. ``loss.backward()`` reduced them): nothing to sum,
        and the released gradients come back after the step (``publish``), as DDP leaves them."""
        r = replica_id
        refs = [p._components[r] if isinstance(p, DistributedVariable) else p for p in self.params]
        grads = [t.grad for t in refs]
        if not summed_already:
            everyone = ctx._strategy.extended.replica_group.exchange(
                r, ("optimizer.step", len(grads)), grads, lambda payloads: [payloads] * len(payloads))
        elif self.num_replicas > 1:
            # No exchange to wait on: meet anyway, so no owner publishes into a replica that is still
            # between its backward pass and its step (where a program may read its weights).
            ctx._barrier("optimizer.step.before")
        updated = []
        with torch.no_grad():
            for i in self.owned[r]:
                if not summed_already:
                    # In place, as DDP does: a parameter's .grad is its own (allocating a sum per step
                    # made the replica threads' malloc arenas page-fault every step).
                    mine = grads[i]
                    others = [g[i] for k, g in enumerate(everyone) if k != r and g[i] is not None]
                    if mine is None and others:
                        mine = refs[i].grad = others.pop(0).clone()
                    for g in others:
                        mine.add_(g)
                if refs[i].grad is not None:
                    updated.append(i)
        for i in self.not_owned[r]:
            refs[i].grad = None
        self._updated[r] = updated
        self._released[r] = [(refs[i], grads[i]) for i in self.not_owned[r]] if summed_already else []

    def publish(self, replica_id: int) -> None:
        """Copy this replica's freshly updated parameters into the other replicas' copies."""
        with torch.no_grad():
            for i in self._updated[replica_id]:
                components = self.params[i]._components
                source = components[replica_id]
                for k, target in enumerate(components):
                    if k != replica_id:
                        target.copy_(source)
        self._updated[replica_id] = []
        for tensor, grad in self._released[replica_id]:
            tensor.grad = grad
        self._released[replica_id] = []
