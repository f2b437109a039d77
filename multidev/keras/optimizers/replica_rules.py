"""A Keras optimizer's update rule on distributed variables: one ``torch.optim`` optimizer per replica.

Each local replica steps its own plain ``torch.optim`` optimizer (a ``rules.KerasRule``), built over
that replica's copies of the variables, with plain ``list``/``dict`` ``param_groups`` and ``state``
and no global step hook: a Keras optimizer is multidev's own object, so it calls its replica's rule
directly (a user's torch optimizer is reached through torch's step pre-hook instead,
``distribute/optimizer_hooks``). Hyperparameters are shared because every rule is built from
the Keras optimizer's own settings, and the learning rate and weight decay are written into every
replica's groups at each step (``run_rule``).

One update plan (``distribute/replica_update.choose``) serves all replicas: it sums, hands each
replica the sums it applies and publishes. Under a split update each variable's state exists once,
on its owner's rule (the other replicas never see its gradient). The canonical state
(``optimizer.variables``, ``state_tensors``, checkpoints) is each variable's owner's (replica 0's
without a split update), keyed by the variable.

Example (what ``Optimizer._apply`` does in one replica, ``r``)::

    rules = rules.with_variables(variables, make_rule)   # once: every replica's rule, the plan
    rules.plan.step(r, grads, functools.partial(rules.run_rule, r, lr, decay), variables)
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from multidev.distribute import replica_update
from multidev.distribute.optimizer_twins import copy_state_entry
from multidev.distribute.replica_update import local_copy
from multidev.keras.optimizers.rules import KerasRule


class ReplicaRules:
    """The torch optimizers (one per local replica) and the update plan of one Keras optimizer."""

    def __init__(self):
        self.variables: list = []        # every tracked variable, in build order
        self._ids: set[int] = set()
        self._position: dict[int, int] = {}   # id(variable) -> its index in ``variables``
        self.strategy: Any = None        # the variables' strategy; None: no distributed variable
        self.rules: list[torch.optim.Optimizer] = []
        self._runs: list[Callable[[], Any]] = []   # per replica: its rule's update
        self._refs: list[list[torch.Tensor]] = []    # per replica: its copies of the variables
        self.plan: replica_update.UpdatePlan = replica_update.IDENTITY

    def tracks(self, variables: list) -> bool:
        return bool(self.rules) and all(id(v) in self._ids for v in variables)

    def with_variables(self, variables: list,
                       make_rule: Callable[[list], torch.optim.Optimizer]) -> "ReplicaRules":
        """These rules, or (``variables`` not all tracked) new ones over every tracked variable and
        ``variables`` (``make_rule(params)``: a fresh update rule with the optimizer's hyperparameters),
        with the state kept (moved to a new owner if the split changes) and the plan chosen again.
        New rules are built whole before the caller publishes them, so replicas that check
        ``tracks`` without the build lock never see half-built rules."""
        new = [v for v in variables if id(v) not in self._ids]
        if self.rules and not new:
            return self
        out = ReplicaRules()
        out.variables = self.variables + new
        out._ids = self._ids | {id(v) for v in new}
        out._position = {id(v): i for i, v in enumerate(out.variables)}
        out.strategy = replica_update.strategy_of(out.variables, "The optimizer")
        n = 1 if out.strategy is None else out.strategy.extended.num_local_replicas
        out._refs = [[local_copy(v, r) for v in out.variables] for r in range(n)]
        out.rules = [make_rule(list(refs)) for refs in out._refs]
        # Under a strategy a Keras rule updates without torch's step hooks (nothing of them is needed);
        # plain variables step through them (ParameterServerStrategy pushes its gradients from one).
        out._runs = [r.apply_update if out.strategy is not None and isinstance(r, KerasRule) else r.step
                     for r in out.rules]
        out.plan = replica_update.choose(out.variables, out.strategy,
                                         elementwise=replica_update.is_elementwise(out.rules[0]))
        for variable, entry in self.canonical_state():
            out.load(variable, entry)
        return out

    def rule_for(self, replica_id: int | None) -> torch.optim.Optimizer:
        """The calling replica's rule (replica 0's in cross-replica context or without a strategy)."""
        return self.rules[replica_id or 0] if self.strategy is not None else self.rules[0]

    def run_rule(self, replica_id: int | None, lr: float, decay: float, tensors: tuple) -> None:
        """The update the plan applies in replica ``replica_id``: ``tensors`` become its copies' ``.grad``
        (None: skipped), then its rule steps at rate ``lr`` with Keras's weight decay, then they go."""
        r = (replica_id or 0) if self.strategy is not None else 0
        for group in self.rules[r].param_groups:
            group["lr"] = lr
            group["weight_decay"] = decay
        refs = self._refs[r]
        for target, g in zip(refs, tensors):
            if g is not None and g.dtype != target.dtype:
                g = g.to(target.dtype)
            target.grad = None if g is None else g.detach()
        self._runs[r]()
        for target in refs:   # Keras keeps no gradient on its variables after a step
            target.grad = None

    def owner(self, index: int) -> int:
        return 0 if self.plan.owners is None else self.plan.owners[index]

    def canonical_state(self) -> Iterator[tuple[Any, dict]]:
        """``(variable, state entry)`` for each variable with state: its owner's entry."""
        for i, v in enumerate(self.variables):
            entry = self._entry(i, v)
            if entry:
                yield v, entry

    def entry(self, variable: Any) -> dict:
        """``variable``'s canonical state entry (empty if none yet)."""
        return self._entry(self.position(variable), variable)

    def _entry(self, index: int, variable: Any) -> dict:
        r = self.owner(index) if self.strategy is not None else 0
        return self.rules[r].state.get(local_copy(variable, r), {}) if self.rules else {}

    def position(self, variable: Any) -> int:
        """``variable``'s index among the tracked variables (the plan's params)."""
        return self._position[id(variable)]

    def load(self, variable: Any, entry: dict) -> None:
        """Set ``variable``'s state: on its owner only under a split update, else on every replica
        (each a copy on that replica's device)."""
        index = self.position(variable)
        targets = [0] if self.strategy is None else (
            [self.owner(index)] if self.plan.owners is not None else range(len(self.rules)))
        for r, rule in enumerate(self.rules):
            local = local_copy(variable, r if self.strategy is not None else 0)
            if r in targets:
                rule.state[local] = copy_state_entry(entry, local.device) if r else dict(entry)
            else:
                rule.state.pop(local, None)
