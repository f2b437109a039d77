"""The update engine: how one replica's optimizer step sums gradients, updates weights and keeps copies equal.

Every optimizer step on distributed variables goes through one ``UpdatePlan`` (chosen once per
optimizer and set of variables by ``choose``), in three stages:

* ``reduce(r, grads)``: ``LocalGrads`` (this replica's own) become ``SummedGrads``, the sums this
  replica applies; ``SummedGrads`` (``loss.backward()`` or a clipping front end summed them) pass;
* ``apply(r, summed, rule)``: the front end's update ``rule`` runs on them (refuses ``LocalGrads``);
* ``publish(r)``: the updated values (and any state of theirs, such as Keras 3's slots) reach the
  other replicas' copies; replica 0 marks the variables in sync.

Gradients come with the variables they are of (``variables=``, in the caller's order; default every
param in order); what a plan hands ``rule`` is aligned with its params (None: nothing to apply). A
bucketed sum packs in the caller's order, so its float reassociation follows the program, not the
order the optimizer was built in. ``step`` runs the three; ``apply_own`` is TensorFlow's ``skip_gradients_aggregation=True``: each
replica applies its own ``LocalGrads`` to its own copies, nothing summed, nothing published.

The plans, first match wins:

1. ``UpdatePlan`` (identity): one replica in sync, or no distributed variable.
2. ``SplitPlan``: replicas of one process on one CPU with their own copies and an element-wise rule
   (``register_elementwise``): each variable's owner (``assign_owners``) sums its gradients (in place
   into its own ``.grad`` when that is where they are), updates it, copies it out (ZeRO stage 1).
3. ``SharedStoragePlan``: ``CentralStorageStrategy``'s replicas share one storage: replica 0 applies.
4. ``BucketPlan``: flat buckets all-reduced by the strategy's collective; every replica applies.

Ordering guarantee: no replica's copy of a variable is written while any replica can still read it in
the current step. A plan that writes another replica's copies (split, shared storage) only does so in
``apply``/``publish``, after every replica entered ``reduce`` (its backward pass done, and whatever it
reads before its step): ``reduce`` of ``LocalGrads`` meets in its exchange; ``reduce`` of
``SummedGrads`` meets in ``_meet`` (nothing else made the replicas meet). ``publish`` ends with a
barrier, so no replica starts its next forward pass while another still writes its copies.
``tests/distribute/test_replica_race.py`` checks both by value, under random delays.

Example (what every front end does, for replica ``r``)::

    plan = choose(params, strategy, elementwise=is_elementwise(rule))
    plan.step(r, LocalGrads(tuple(grads)), rule_fn, variables)   # rule_fn(summed_tensors): the update
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import torch
from torch._C import DisableTorchFunction

from multidev._core.enums import ReduceOp
from multidev.distribute.gradient_buckets import GradientBuckets
from multidev.values.context import current_replica_context
from multidev.values.gradients import LocalGrads, SummedGrads
from multidev.values.variables import DistributedVariable

Rule = Callable[[tuple], None]   # applies summed tensors (aligned with the plan's params; None: skip)

_ELEMENTWISE_NAMES = ("SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "Adadelta", "RMSprop",
                      "Rprop", "ASGD", "Adafactor", "Muon")   # per variable: Adafactor's and Muon's
# row/column statistics and orthogonalisation stay inside one variable
# Exact types: a subclass may override its update with something that is not per-parameter.
ELEMENTWISE: set[type] = {getattr(torch.optim, n) for n in _ELEMENTWISE_NAMES if hasattr(torch.optim, n)}


def register_elementwise(cls: type) -> type:
    """Declare ``cls`` (exactly that type, not its subclasses) an update rule whose update is element-wise
    per variable, so replicas may split it (multidev's Keras rules, Keras 3's built-in optimizers)."""
    ELEMENTWISE.add(cls)
    return cls


def is_elementwise(rule: Any) -> bool:
    return type(rule) in ELEMENTWISE


def local_copy(param: Any, replica_id: int) -> torch.Tensor:
    """Replica ``replica_id``'s tensor of ``param`` (a plain tensor is every replica's)."""
    return param._components[replica_id] if isinstance(param, DistributedVariable) else param


def strategy_of(params: Sequence[Any], what: str) -> Any:
    """The one strategy of ``params``' distributed variables (None: none is distributed)."""
    strategies = {id(p._strategy): p._strategy for p in params if isinstance(p, DistributedVariable)}
    if len(strategies) > 1:
        raise ValueError(f"{what} mixes variables of {len(strategies)} different strategies; create the model "
                         "and the optimizer in one strategy's scope.")
    return next(iter(strategies.values()), None)


def assign_owners(params: Sequence[Any], num_replicas: int) -> list[int]:
    """The owner replica of each parameter: largest first onto the least-loaded replica (by bytes). A plain
    tensor (shared by every replica, made outside the scope) is owned by replica 0 and not split."""
    owners = [0] * len(params)
    load = [0] * num_replicas
    distributed = [i for i, p in enumerate(params) if isinstance(p, DistributedVariable)]
    for i in sorted(distributed, key=lambda i: -params[i].numel() * params[i].element_size()):
        r = min(range(num_replicas), key=load.__getitem__)
        owners[i] = r
        load[r] += params[i].numel() * params[i].element_size()
    return owners


def _require(grads: Any, kind: type, where: str) -> None:
    if not isinstance(grads, kind):
        raise TypeError(f"UpdatePlan.{where} takes {kind.__name__}, got {type(grads).__name__} ({grads!r}): "
                        "reduce() makes SummedGrads; apply_own() applies a replica's own LocalGrads.")


class UpdatePlan:
    """The identity plan (a null object; one replica, or no distributed variable), and every plan's base."""

    updates_once = False   # each variable updated on one replica only (its state exists once)
    owners: list[int] | None = None

    def __init__(self, params: Sequence[Any], strategy: Any):
        self.params = list(params)
        self.strategy = strategy
        self._distributed = [p for p in self.params if isinstance(p, DistributedVariable)]
        self._position = {id(p): i for i, p in enumerate(self.params)}
        n = 1 if strategy is None else strategy.extended.num_local_replicas
        #: Per local replica: its tensors of the params (what its update rule and ``.grad`` work on).
        self.refs = [[local_copy(p, r) for p in self.params] for r in range(n)]
        self._released: dict[int, list] = {}   # replica -> [(tensor, its summed .grad)] set aside by apply_as_grads

    def _order(self, variables: Sequence[Any] | None) -> list[int] | None:
        """The params' indices of ``variables`` (gradients handed in that order); None: all, in order."""
        return None if variables is None else [self._position[id(v)] for v in variables]

    def _spread(self, grads: Any, order: list[int] | None) -> Any:
        """``grads`` (in ``order``) as the same type aligned with the params (None where not given)."""
        if order is None:
            return grads
        tensors: list = [None] * len(self.params)
        for i, g in zip(order, grads.tensors):
            tensors[i] = g
        return type(grads)(tuple(tensors))

    # --- the stages (``variables``: the gradients are of these params, in this order; default all) ------
    def sum_all(self, replica_id: int | None, grads: LocalGrads, variables: Sequence[Any] | None = None) -> SummedGrads:
        """Every sum on every replica (before clipping or a finite check, which need them all), aligned
        with the params."""
        _require(grads, LocalGrads, "sum_all")
        return SummedGrads(self._spread(grads, self._order(variables)).tensors)

    def reduce(self, replica_id: int | None, grads: LocalGrads | SummedGrads,
               variables: Sequence[Any] | None = None) -> SummedGrads:
        """The sums this replica applies, aligned with the params."""
        if isinstance(grads, SummedGrads):
            return self._spread(grads, self._order(variables))
        return self.sum_all(replica_id, grads, variables)

    def apply(self, replica_id: int | None, summed: SummedGrads, rule: Rule) -> None:
        _require(summed, SummedGrads, "apply")
        rule(summed.tensors)

    def apply_as_grads(self, replica_id: int | None, given: LocalGrads | SummedGrads, summed: SummedGrads) -> None:
        """``apply`` whose rule makes the sums this replica's copies' ``.grad`` (None: a ``torch.optim`` step
        then skips the tensor). Summed gradients ``given`` held that this replica does not apply come back
        in ``publish``, as DDP leaves them."""
        self.apply(replica_id, summed, functools.partial(self._set_grads, replica_id, given))

    def reduce_as_grads(self, replica_id: int, given: LocalGrads | SummedGrads) -> None:
        """``reduce`` then ``apply_as_grads``: what a ``torch.optim`` step does before the class's own
        ``step`` runs on this replica's copies."""
        self.apply_as_grads(replica_id, given, self.reduce(replica_id, given))

    def _set_grads(self, replica_id: int | None, given: Any, tensors: tuple) -> None:
        keep = isinstance(given, SummedGrads)
        released = []
        for t, g, old in zip(self.refs[replica_id or 0], tensors, given.tensors):
            if g is not old:
                t.grad = g
                if keep and g is None:
                    released.append((t, old))
        if released:
            self._released[replica_id or 0] = released

    def publish(self, replica_id: int | None) -> None:
        """Make the update every replica's (the plan's ``_publish``), then finish the step."""
        self._publish(replica_id)
        released = self._released.pop(replica_id or 0, None)
        for t, g in released or ():
            t.grad = g
        self._mark_synced(replica_id)

    def _publish(self, replica_id: int | None) -> None:
        """Nothing to copy: every replica updated its own copies (or there is one)."""

    def step(self, replica_id: int | None, grads: LocalGrads | SummedGrads, rule: Rule,
             variables: Sequence[Any] | None = None) -> None:
        self.apply(replica_id, self.reduce(replica_id, grads, variables), rule)
        self.publish(replica_id)

    def apply_own(self, replica_id: int | None, grads: LocalGrads, rule: Rule,
                  variables: Sequence[Any] | None = None) -> None:
        """Each replica applies its own gradients to its own copies (``skip_gradients_aggregation``)."""
        _require(grads, LocalGrads, "apply_own")
        for p in self._distributed:
            p._own_updates = True   # its copies part by design: first_run_agreement leaves it alone
        rule(self._spread(grads, self._order(variables)).tensors)
        self._mark_synced(replica_id)

    def _mark_synced(self, replica_id: int | None) -> None:
        """Replica 0, its step done: its copies were written by the update path, not by the user."""
        if not replica_id:
            for p in self._distributed:
                p._mark_synced()


class BucketPlan(UpdatePlan):
    """Sum in flat buckets (one collective per bucket, buffers reused): every replica then applies the
    identical update to its own copies."""

    def __init__(self, params: Sequence[Any], strategy: Any):
        super().__init__(params, strategy)
        self.group = strategy.extended.replica_group
        self._buckets = GradientBuckets(self.group.bucket_bytes)

    def sum_all(self, replica_id: int | None, grads: LocalGrads, variables: Sequence[Any] | None = None) -> SummedGrads:
        """Packed in the caller's order: the cross-process all-reduce's summation order (its float
        reassociation) then follows the program, not how the optimizer happened to be built."""
        _require(grads, LocalGrads, "sum_all")
        order = self._order(variables)
        ctx = current_replica_context()
        if ctx is None:   # cross-replica: nothing to sum (a step there is refused)
            return SummedGrads(self._spread(grads, order).tensors)
        refs = self.refs[replica_id or 0]
        refs = refs if order is None else [refs[i] for i in order]
        # every gradient here: no need to read the presence flags back (a host-device sync per bucket on a GPU)
        summed = SummedGrads(tuple(self._buckets.all_reduce(ctx, refs, grads.tensors, ReduceOp.SUM,
                                                            all_present=all(g is not None for g in grads.tensors))))
        return self._spread(summed, order)

    def _meet(self, replica_id: int, name: str) -> None:
        self.group.barrier(replica_id, f"replica_update.{name}")


class SharedStoragePlan(BucketPlan):
    """Replicas share one storage (``CentralStorageStrategy``): replica 0 alone applies the sums."""

    updates_once = True

    def reduce(self, replica_id: int, grads: LocalGrads | SummedGrads,
               variables: Sequence[Any] | None = None) -> SummedGrads:
        if isinstance(grads, SummedGrads):
            self._meet(replica_id, "before")   # no collective made the replicas meet before replica 0 writes
        grads = super().reduce(replica_id, grads, variables)
        if replica_id == 0:
            self._refuse_written_before()
        return grads if replica_id == 0 else SummedGrads((None,) * len(grads.tensors))

    def _refuse_written_before(self) -> None:
        """Every replica has reached the step: one that wrote the one copy in place before it (SwAV's
        prototypes normalised at the step's start, ``w.copy_(F.normalize(w))``) made its write on every
        replica's weights, and the update would mark it synced (the run's end would no longer see it)."""
        for p in self.params:
            if isinstance(p, DistributedVariable) and p._share_storage and len(p._components) > 1 \
                    and p._components[0]._version != p._synced_version:
                raise p._written_by_every_replica()

    def _publish(self, replica_id: int) -> None:
        self._meet(replica_id, "after")   # nobody reads the one storage before replica 0 wrote it


def _unmoded(method: Callable) -> Callable:
    """``method`` with torch function handling off: it reads and writes plain copies and gradients only (sums,
    copies, ``.grad``), which a replica's random-stream mode would otherwise see, about 1 us each: 4% of a small
    model's step on 2 logical CPUs (``benchmarks/replica_python_cost.py``). No draws, no user code."""
    @functools.wraps(method)
    def run(*args, **kwargs):
        with DisableTorchFunction():
            return method(*args, **kwargs)
    return run


class SplitPlan(BucketPlan):
    """Each variable's owner sums its gradients, updates it and copies it (and ``extra[i]``, e.g. its
    optimizer slots) into the other replicas' copies. ``idle_fallback``: a rule that must run on every
    replica (Keras 3 counts its iterations in it) gets every sum where some replica owns no gradient."""

    updates_once = True

    def __init__(self, params: Sequence[Any], strategy: Any, extra: Sequence[Sequence[Any]] | None = None,
                 idle_fallback: bool = False):
        super().__init__(params, strategy)
        n = self.group.size
        self.owners = assign_owners(self.params, n)
        split = [isinstance(p, DistributedVariable) for p in self.params]
        self.owned = [[i for i, o in enumerate(self.owners) if o == r and split[i]] for r in range(n)]
        self._shared = [i for i, s in enumerate(split) if not s]   # plain tensors: each replica's own gradient
        self.extra = [list(e) for e in extra] if extra is not None else [[] for _ in self.params]
        self.idle_fallback = idle_fallback
        self._publishing: list[list[int]] = [[] for _ in range(n)]
        self._updated: list[list[int]] = [[] for _ in range(n)]

    @_unmoded
    def reduce(self, replica_id: int, grads: LocalGrads | SummedGrads,
               variables: Sequence[Any] | None = None) -> SummedGrads:
        r, refs = replica_id, self.refs[replica_id]
        grads = self._spread(grads, self._order(variables))
        out: list = [None] * len(self.params)
        for i in self._shared:
            out[i] = grads.tensors[i]
        if isinstance(grads, SummedGrads):
            self._meet(r, "before")    # nothing else made the replicas meet before owners write their copies
            for i in self.owned[r]:
                out[i] = grads.tensors[i]
            self._publishing[r] = self.owned[r]
            return SummedGrads(tuple(out))
        everyone = self.group.share(r, ("replica_update.reduce", len(out)), grads.tensors)
        if self.idle_fallback and not all(any(g[i] is not None for g in everyone for i in owned) for owned in self.owned):
            self._publishing[r] = []   # every replica sums and applies everything itself
            return SummedGrads(tuple(_fresh_sum([g[i] for g in everyone]) for i in range(len(out))))
        with torch.no_grad():
            for i in self.owned[r]:
                mine = everyone[r][i]
                if mine is not None and mine is refs[i].grad:
                    # In place, as DDP does: the copy's own .grad (allocating a sum per step made the
                    # replica threads' malloc arenas page-fault every step). Nobody else reads it now.
                    for k, g in enumerate(everyone):
                        if k != r and g[i] is not None:
                            mine.add_(g[i])
                    out[i] = mine
                else:
                    out[i] = _fresh_sum([g[i] for g in everyone])
        self._publishing[r] = self.owned[r]
        return SummedGrads(tuple(out))

    def apply(self, replica_id: int, summed: SummedGrads, rule: Rule) -> None:
        _require(summed, SummedGrads, "apply")
        self._updated[replica_id] = [i for i in self._publishing[replica_id] if summed.tensors[i] is not None]
        rule(summed.tensors)

    publish = _unmoded(UpdatePlan.publish)

    def _publish(self, replica_id: int) -> None:
        """Copy this replica's updated variables out, then meet: the step ends when every copy is written."""
        self._copy_out(replica_id)
        self._meet(replica_id, "after")

    def _copy_out(self, r: int) -> None:
        """Copy this replica's freshly updated variables (and their extra state) into the other copies."""
        with torch.no_grad():
            for i in self._updated[r]:
                for holder in (self.params[i], *self.extra[i]):
                    components = holder._components
                    for k, target in enumerate(components):
                        if k != r:
                            target.copy_(components[r])
        self._updated[r] = []


def _fresh_sum(grads: Sequence[Any]) -> torch.Tensor | None:
    """The replicas' gradients summed in replica order into a new tensor (None: nobody has one)."""
    present = [g for g in grads if g is not None]
    if not present:
        return None
    total = present[0].clone() if len(present) > 1 else present[0]
    for g in present[1:]:
        total.add_(g)
    return total


IDENTITY = UpdatePlan((), None)   # an optimizer over no distributed variable


def splits(strategy: Any) -> bool:
    """Whether ``strategy``'s replicas split element-wise updates: replicas of one process on one CPU,
    each with its own copies."""
    group = strategy.extended.replica_group
    n = strategy.num_replicas_in_sync
    return n > 1 and group.cooperative_reduce and not group.shared_storage and n == group.size


def choose(params: Sequence[Any], strategy: Any, *, elementwise: bool, extra: Sequence[Sequence[Any]] | None = None,
           idle_fallback: bool = False) -> UpdatePlan:
    """The plan for an update rule over ``params`` (variables of ``strategy``; see the module docstring).
    ``elementwise``: the rule updates each variable from its gradient alone (``is_elementwise``)."""
    if strategy is None or strategy.num_replicas_in_sync == 1 or not any(
            isinstance(p, DistributedVariable) for p in params):
        return UpdatePlan(params, strategy)
    if elementwise and splits(strategy):
        return SplitPlan(params, strategy, extra, idle_fallback)
    if strategy.extended.replica_group.shared_storage:
        return SharedStoragePlan(params, strategy)
    # (A torch loop's loss.backward() reduced its gradients already, overlapping the cross-process
    # all-reduce with backward where it can: backward_reduce.py. Nothing is left to overlap here.)
    return BucketPlan(params, strategy)


__all__ = ["LocalGrads", "SummedGrads", "UpdatePlan", "BucketPlan", "SharedStoragePlan", "SplitPlan", "choose",
           "IDENTITY", "splits", "register_elementwise", "is_elementwise", "local_copy", "strategy_of", "assign_owners",
           "ELEMENTWISE"]
