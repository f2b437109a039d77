"""A Keras optimizer's update rule on distributed variables: one ``torch.optim`` optimizer per replica.

Each local replica steps its own plain ``torch.optim`` optimizer (a ``rules.KerasRule``), built over
that replica's copies of the variables, with plain ``list``/``dict`` ``param_groups`` and ``state``
and no global step hook: a Keras optimizer is multidev's own object, so it calls its replica's rule
directly (a user's torch optimizer is reached through torch's step pre-hook instead,
``distribute/optimizer_hooks``). Hyperparameters are shared because every rule is built from
the Keras optimizer's own settings, and the learning rate and weight decay are written into every
replica's groups at each step (``Optimizer._apply``).

One gradient reducer (``distribute/gradient_reducer.choose``) serves all replicas. Under a split
update each variable's state exists once, on its owner's rule (the other replicas never see its
gradient), as before. The canonical state (``optimizer.variables``, ``state_tensors``, checkpoints)
is each variable's owner's (replica 0's without a split update), keyed by the variable.

Example (what ``Optimizer._apply`` does in one replica, ``r``)::

    rules = rules.with_variables(variables, make_rule)   # once: every replica's rule, the reducer
    rule = rules.rule_for(r)
    rules.reducer.before_step(r); rule.apply_update(); rules.after_step(r)
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from multidev.distribute import gradient_reducer
from multidev.distribute.gradient_reducer import local_copy
from multidev.distribute.optimizer_hooks import copy_state_entry
from multidev.values.variables import DistributedVariable


class ReplicaRules:
    """The torch optimizers (one per local replica) and the gradient reducer of one Keras optimizer."""

    def __init__(self):
        self.variables: list = []        # every tracked variable, in build order
        self._ids: set[int] = set()
        self.strategy: Any = None        # the variables' strategy; None: no distributed variable
        self.rules: list[torch.optim.Optimizer] = []
        self.reducer: gradient_reducer.GradientReducer = gradient_reducer.IDENTITY
        self._owners: list[int] | None = None   # per variable: owner replica under a split update

    def tracks(self, variables: list) -> bool:
        return bool(self.rules) and all(id(v) in self._ids for v in variables)

    def with_variables(self, variables: list,
                       make_rule: Callable[[list], torch.optim.Optimizer]) -> "ReplicaRules":
        """These rules, or (``variables`` not all tracked) new ones over every tracked variable and
        ``variables`` (``make_rule(params)``: a fresh update rule with the optimizer's hyperparameters),
        with the state kept (moved to a new owner if the split changes) and the reducer chosen again.
        New rules are built whole before the caller publishes them, so replicas that check
        ``tracks`` without the build lock never see half-built rules."""
        new = [v for v in variables if id(v) not in self._ids]
        if self.rules and not new:
            return self
        out = ReplicaRules()
        out.variables = self.variables + new
        out._ids = self._ids | {id(v) for v in new}
        out.strategy = _strategy_of(out.variables)
        n = 1 if out.strategy is None else out.strategy.extended.num_local_replicas
        out.rules = [make_rule([local_copy(v, r) for v in out.variables]) for r in range(n)]
        self.reducer.close()   # e.g. overlap hooks on the tensors
        out.reducer = (gradient_reducer.IDENTITY if out.strategy is None
                       else gradient_reducer.choose(out.rules[0], out.variables, out.strategy))
        out._owners = _owners(out.reducer, len(out.variables))
        for variable, entry in self.canonical_state():
            out.load(variable, entry)
        return out

    def rule_for(self, replica_id: int | None) -> torch.optim.Optimizer:
        """The calling replica's rule (replica 0's in cross-replica context or without a strategy)."""
        return self.rules[replica_id or 0] if self.strategy is not None else self.rules[0]

    def after_step(self, replica_id: int, publish: bool = True) -> None:
        """Finish a replica's step (a split update publishes its owned values; not when each replica
        applied its own gradients to its own copies); replica 0 then marks the variables in sync
        (their components were written by the update path, not by the user)."""
        if publish:
            self.reducer.after_step(replica_id)
        if replica_id == 0:
            for v in self.variables:
                if isinstance(v, DistributedVariable):
                    v._mark_synced()

    def owner(self, index: int) -> int:
        return 0 if self._owners is None else self._owners[index]

    def canonical_state(self) -> Iterator[tuple[Any, dict]]:
        """``(variable, state entry)`` for each variable with state: its owner's entry."""
        for i, v in enumerate(self.variables):
            entry = self._entry(i, v)
            if entry:
                yield v, entry

    def entry(self, variable: Any) -> dict:
        """``variable``'s canonical state entry (empty if none yet)."""
        return self._entry(self._index(variable), variable)

    def _entry(self, index: int, variable: Any) -> dict:
        r = self.owner(index) if self.strategy is not None else 0
        return self.rules[r].state.get(local_copy(variable, r), {}) if self.rules else {}

    def _index(self, variable: Any) -> int:
        return next(i for i, v in enumerate(self.variables) if v is variable)

    def load(self, variable: Any, entry: dict) -> None:
        """Set ``variable``'s state: on its owner only under a split update, else on every replica
        (each a copy on that replica's device)."""
        index = self._index(variable)
        targets = [0] if self.strategy is None else (
            [self.owner(index)] if self._owners is not None else range(len(self.rules)))
        for r, rule in enumerate(self.rules):
            local = local_copy(variable, r if self.strategy is not None else 0)
            if r in targets:
                rule.state[local] = copy_state_entry(entry, local.device) if r else dict(entry)
            else:
                rule.state.pop(local, None)


def _strategy_of(variables: list) -> Any:
    strategies = {id(v._strategy): v._strategy for v in variables if isinstance(v, DistributedVariable)}
    if len(strategies) > 1:
        raise ValueError(f"The optimizer's variables belong to {len(strategies)} different strategies; create the "
                         "model and the optimizer in one strategy's scope.")
    return next(iter(strategies.values()), None)


def _owners(reducer: gradient_reducer.GradientReducer, count: int) -> list[int] | None:
    if not isinstance(reducer, gradient_reducer.SplitUpdate):
        return None
    owners = [0] * count
    for r, indices in enumerate(reducer.shards.owned):
        for i in indices:
            owners[i] = r
    return owners
