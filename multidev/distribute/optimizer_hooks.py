"""Any ``torch.optim`` optimizer over distributed variables trains synchronously inside ``strategy.run``.

torch runs global hooks around every ``optimizer.step()``. The first step in replica context gives
the optimizer replica-aware views of its ``param_groups`` and ``state``: inside ``strategy.run``
each replica iterates groups holding its own plain leaf tensors (so torch's fast ``foreach``
kernels apply and nothing pays a per-op dispatch), with state keyed by those tensors; in
cross-replica context (``state_dict()``, LR schedulers, inspection) the optimizer shows the
user's groups and replica 0's state keyed by the distributed variables.

Around each step in replica context the hooks call the optimizer's gradient reducer
(``gradient_reducer``: chosen once per optimizer and its variables' strategy, the same object a
Keras optimizer sums with): ``before_step`` makes each replica's gradients the sums it applies,
``after_step`` finishes the step (a split update copies the owners' new values to the others).

Why views rather than one torch optimizer per replica: every replica thread calls the user's one
optimizer object, and torch's step hooks can neither redirect nor skip that call, so the class's
``step`` reads ``self.param_groups`` / ``self.state`` of the user's object; only answering per thread
there avoids replacing the instance's ``step`` (which torch's LR schedulers wrap themselves).
multidev's own Keras optimizers have that seam and do not come here: each replica steps its own
plain torch optimizer and calls the same reducer directly (``keras/optimizers/replica_rules.py``).
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from typing import Any, Iterator

import torch
from torch.optim import optimizer as torch_optimizer

from multidev.distribute import gradient_reducer
from multidev.distribute.gradient_reducer import local_copy as _local
from multidev.values.context import current_replica_id as _replica_id
from multidev.values.variables import DistributedVariable


class ReplicaGroup(dict):
    """One replica's view of a param group: its own ``params``; every other key (lr, momentum, ...)
    is read from and written to the user's group, so schedulers and Keras see one value."""

    __slots__ = ("_user",)

    def __init__(self, user_group: dict, params: list):
        super().__init__(params=params)
        self._user = user_group

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self, key) if key == "params" else self._user[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        if key == "params":
            dict.__setitem__(self, key, value)
        else:
            self._user[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.__getitem__(self, key) if key == "params" else self._user.get(key, default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return dict.__getitem__(self, key) if key == "params" else self._user.setdefault(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._user

    def keys(self):
        return self._user.keys()

    def __iter__(self):
        return iter(self._user)

    def __len__(self) -> int:
        return len(self._user)

    def items(self):
        return [(k, self[k]) for k in self._user]

    def values(self):
        return [self[k] for k in self._user]


class ReplicaParamGroups(list):
    """``optimizer.param_groups``: the user's groups in cross-replica context, the calling
    replica's groups (same hyperparameters, its own tensors) inside ``strategy.run``."""

    def __init__(self, groups: list, per_replica: list[list[dict]]):
        super().__init__(groups)
        self.per_replica = per_replica

    def __iter__(self) -> Iterator[dict]:
        r = _replica_id()
        return list.__iter__(self) if r is None else iter(self.per_replica[r])

    def __getitem__(self, index: Any) -> Any:
        r = _replica_id()
        return list.__getitem__(self, index) if r is None else self.per_replica[r][index]

    def append(self, group: dict) -> None:
        """``optimizer.add_param_group``: every replica sees the new group at once (its
        ``zero_grad`` may run before the next step reinstalls the views)."""
        list.append(self, group)
        for r, groups in enumerate(self.per_replica):
            groups.append(ReplicaGroup(group, [_local(p, r) for p in group["params"]]))


class ReplicaOptimizerState(dict):
    """``optimizer.state`` with one state dict per replica, keyed by the replica's tensors.

    In cross-replica context it shows replica 0's state keyed by the distributed variables, so
    ``state_dict()``/``load_state_dict()`` see the canonical layout.
    """

    def __init__(self, per_replica: list[defaultdict], variable_of: dict[int, Any],
                 canonical: dict[int, torch.Tensor] | None = None):
        super().__init__()
        self.per_replica = per_replica
        self._variable_of = variable_of  # id(replica 0's tensor) -> distributed variable
        # Split updates (optimizer_shards): every replica's dict is one dict keyed by replica 0's tensors.
        self._canonical = canonical

    def _key(self, key: Any) -> Any:
        if isinstance(key, DistributedVariable):
            return key._components[0]
        return key if self._canonical is None else self._canonical.get(id(key), key)

    def _mine(self) -> defaultdict:
        return self.per_replica[_replica_id() or 0]

    def __getitem__(self, key: Any) -> Any:
        r = _replica_id()
        if r is not None and self._canonical is None:
            return self.per_replica[r][key]
        return self.per_replica[r or 0][self._key(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        r = _replica_id()
        if r is not None or self._canonical is not None:
            self.per_replica[r or 0][self._key(key)] = value
            return
        # Cross-replica writes (restoring state) reach every replica, each on its own device.
        variable = key if isinstance(key, DistributedVariable) else self._variable_of.get(id(key))
        for i, state in enumerate(self.per_replica):
            local = _local(variable, i) if variable is not None else key
            state[local] = value if i == 0 else _copy_state(value, local.device) if isinstance(value, dict) else value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = {} if default is None else default
        return self[key]

    def __delitem__(self, key: Any) -> None:
        del self._mine()[self._key(key)]

    def __contains__(self, key: object) -> bool:
        return self._key(key) in self._mine()

    def get(self, key: Any, default: Any = None) -> Any:
        return self._mine().get(self._key(key), default)

    def __len__(self) -> int:
        return len(self._mine())

    def _public_key(self, key: Any) -> Any:
        return key if _replica_id() is not None else self._variable_of.get(id(key), key)

    def __iter__(self) -> Iterator:
        return (self._public_key(k) for k in self._mine())

    def keys(self):
        return list(iter(self))

    def values(self):
        return self._mine().values()

    def items(self):
        return [(self._public_key(k), v) for k, v in self._mine().items()]

    def canonical(self) -> dict:
        """Replica 0's state keyed by the distributed variables, from any context."""
        return {self._variable_of.get(id(k), k): v for k, v in self.per_replica[0].items()}

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def _copy_state(entry: dict, device: torch.device) -> dict:
    return {k: (v.detach().to(device, copy=True) if isinstance(v, torch.Tensor) else v) for k, v in entry.items()}


class _Plan:
    """One optimizer's distributed layout: its variables, strategy and gradient reducer."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list):
        self.params = params
        self.key = tuple(id(p) for p in params)
        strategies = {id(p._strategy): p._strategy for p in params if isinstance(p, DistributedVariable)}
        if len(strategies) > 1:
            raise ValueError(
                f"Optimizer {type(optimizer).__name__} mixes variables of {len(strategies)} different "
                "strategies; create the model and the optimizer in one strategy's scope."
            )
        self.strategy = next(iter(strategies.values()))
        self.num_local = len(self.strategy.extended._devices)  # this process: one view per replica
        self.reducer = gradient_reducer.choose(optimizer, params, self.strategy)
        # A split update keeps one optimizer state, keyed by replica 0's tensors.
        self.shards = self.reducer.shards if isinstance(self.reducer, gradient_reducer.SplitUpdate) else None
        self.lock = threading.Lock()
        self.groups: Any = None  # the ReplicaParamGroups installed for this plan
        self.num_groups = 0


_plans: "weakref.WeakKeyDictionary[torch.optim.Optimizer, _Plan | None]" = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()


def _user_groups(optimizer: torch.optim.Optimizer) -> list:
    return list(list.__iter__(optimizer.param_groups))


_plain: "weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple]" = weakref.WeakKeyDictionary()


def _plan_for(optimizer: torch.optim.Optimizer) -> _Plan | None:
    groups = optimizer.param_groups
    seen = _plain.get(optimizer)
    if seen is not None and seen[0] is groups and seen[1] == list.__len__(groups):
        return None  # fast path for plain torch optimizers: checked before, groups unchanged
    plan = _plans.get(optimizer, False)
    if plan and groups is plan.groups and list.__len__(groups) == plan.num_groups:
        return plan  # fast path: views installed, no group added since
    params = [p for g in _user_groups(optimizer) for p in g["params"]]
    distributed = any(isinstance(p, DistributedVariable) for p in params)
    if not distributed:
        _plain[optimizer] = (groups, list.__len__(groups))
        if plan is None:
            return None
    key = tuple(id(p) for p in params)
    if plan and plan.key == key:
        return plan
    with _plans_lock:
        plan = _plans.get(optimizer, False)
        if not plan or plan.key != key:
            if plan:
                plan.reducer.close()  # e.g. overlap hooks on the old tensors
            plan = _Plan(optimizer, params) if distributed else None
            _plans[optimizer] = plan
    return plan


def _install_views(optimizer: torch.optim.Optimizer, plan: _Plan) -> None:
    """Give ``optimizer`` replica-aware param groups and state (again after ``load_state_dict``)."""
    groups = _user_groups(optimizer)
    n = plan.num_local
    per_replica_groups = [[ReplicaGroup(g, [_local(p, r) for p in g["params"]]) for g in groups] for r in range(n)]
    old_state = optimizer.state
    if isinstance(old_state, ReplicaOptimizerState):
        old_state = old_state.canonical()
    devices = plan.strategy.extended._torch_devices
    variable_of = {id(p._components[0]): p for p in plan.params if isinstance(p, DistributedVariable)}
    if plan.shards is not None:  # one state, kept by each parameter's owner: no copies
        shared: defaultdict = defaultdict(dict)
        for param, entry in old_state.items():
            shared[_local(param, 0)] = entry
        optimizer.state = ReplicaOptimizerState([shared] * n, variable_of, plan.shards.canonical_keys())
    else:
        per_replica_state: list[defaultdict] = [defaultdict(dict) for _ in range(n)]
        for param, entry in old_state.items():
            for r in range(n):
                per_replica_state[r][_local(param, r)] = entry if r == 0 else _copy_state(entry, devices[r])
        optimizer.state = ReplicaOptimizerState(per_replica_state, variable_of)
    optimizer.param_groups = ReplicaParamGroups(groups, per_replica_groups)
    plan.groups, plan.num_groups = optimizer.param_groups, len(groups)


def _views_current(optimizer: torch.optim.Optimizer) -> bool:
    groups = optimizer.param_groups
    return (type(groups) is ReplicaParamGroups and type(optimizer.state) is ReplicaOptimizerState
            and len(groups.per_replica[0]) == list.__len__(groups))


def _pre_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    plan = _plan_for(optimizer)
    if plan is None:
        return None
    replica_id = _replica_id()
    if replica_id is None:
        raise RuntimeError(
            f"{type(optimizer).__name__}.step() over variables created in {type(plan.strategy).__name__}.scope() "
            "cannot be called in cross-replica context: call it inside strategy.run(train_step, ...) so every "
            "replica's gradients are summed and every copy is updated."
        )
    if plan.groups is not optimizer.param_groups or not _views_current(optimizer):
        with plan.lock:
            if plan.groups is not optimizer.param_groups or not _views_current(optimizer):
                _install_views(optimizer, plan)
    plan.reducer.before_step(replica_id)
    return None


def reducer_for(optimizer: torch.optim.Optimizer) -> gradient_reducer.GradientReducer:
    """The gradient reducer ``optimizer.step()`` uses in replica context (``IDENTITY`` for an
    optimizer over no distributed variable), chosen once per optimizer and its variables."""
    plan = _plan_for(optimizer)
    return gradient_reducer.IDENTITY if plan is None else plan.reducer


def _post_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    plan = _plans.get(optimizer)
    if plan is None:
        return
    replica_id = _replica_id()
    plan.reducer.after_step(replica_id)
    if replica_id == 0:
        for p in plan.params:
            if isinstance(p, DistributedVariable):
                p._mark_synced()


_handles: list = []


def install() -> None:
    """Register the global optimizer hooks once (idempotent)."""
    if _handles:
        return
    _handles.append(torch_optimizer.register_optimizer_step_pre_hook(_pre_step))
    _handles.append(torch_optimizer.register_optimizer_step_post_hook(_post_step))
