"""Any ``torch.optim`` optimizer over distributed variables trains synchronously inside ``strategy.run``.

The user's optimizer is left as torch made it: its ``param_groups`` and ``state`` stay the plain
list and dict, holding the distributed variables and, for each, the canonical state (replica 0's;
the owner's under a split update); its groups are dicts whose numbers written in a replica are that
replica's (``replica_hyperparameters``). Each local replica steps a *twin* instead: an object of the
optimizer's own class with the user's settings, whose groups hold that replica's plain leaf
tensors (torch's fast ``foreach`` kernels, no per-op dispatch) and whose state is keyed by them.

The seam is torch's documented global step pre-hook, which may return new ``step`` arguments:
inside ``strategy.run`` it returns the calling replica's twin as ``self``, so the class's own
``step`` runs on the twin, while torch still runs the user's step hooks, an LR scheduler's step
wrapper and the profiler on the user's object. Hyperparameters flow from the user's groups into
every twin's at each step (schedulers and ``group['lr'] = ...`` reach every replica); a new group
(``add_param_group``), ``load_state_dict`` or a restored checkpoint makes new twins.

Where each variable is updated on one replica (a split update, CentralStorageStrategy's shared
storage, one replica per process) every twin's state *is* the user's dict, seen through the
replica's tensors (``_StateByVariable``). Otherwise (GPUs, cross-process buckets with several
local replicas) replica 0's twin uses the user's dict and the others keep their own copies; state
the user writes in cross-replica context reaches them when the next ``strategy.run`` starts.

Around each step in replica context the hooks drive the optimizer's update plan
(``replica_update``: chosen once per optimizer and its variables, the engine every front end uses):
the pre-hook reduces the replica's ``.grad`` (``LocalGrads``; ``SummedGrads`` when ``loss.backward()``
already reduced them, ``backward_reduce``: never reduced twice) and hands the sums to the twin as its
``.grad``; torch's ``step`` updates; the post-hook publishes (a split update copies the owners' new
values to the others). ``step(closure)``: the closure's loss is the global batch's (all-reduced) and
its ``loss.backward()`` reduces the gradients; the pre-hook evaluates it once before reducing (torch's
optimizers evaluate it once), except for LBFGS, which re-evaluates it between updates, and a ``step``
written outside torch (SAM's evaluates it at perturbed weights): they get it whole, with every replica
updating its own copies. multidev's Keras optimizers are multidev's own objects and hold one plain
torch optimizer per replica directly (``keras/optimizers/replica_rules.py``).

Example (what runs when a replica calls ``opt.step()``)::

    plan = _plan_for(opt)                      # once per optimizer and set of variables
    twin = plan.twin_for(opt, replica_id)      # groups of this replica's tensors, lr synced
    plan.engine.apply_as_grads(replica_id, grads, plan.engine.reduce(replica_id, grads))   # sums as .grad
    type(opt).step(twin)                       # torch's own update, on plain tensors
    plan.engine.publish(replica_id)
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from typing import Any, Callable

import torch
from torch.optim import optimizer as torch_optimizer

from multidev.distribute import (compiled_step, lazy_modules, module_hooks, reduced_grads, replica_state,
                                 replica_update, scripted_modules, shared_leaves)
from multidev.distribute.optimizer_twins import (TwinAttributes, _make_twin, _StateByVariable, copy_state_entry,
                                                 entry_signature)
from multidev.distribute.replica_hyperparameters import replica_values
from multidev.distribute.replica_update import local_copy
from multidev.values.context import replica_env as _replica_env
from multidev.values.variables import DistributedVariable
from multidev.values.whole_variable_ops import relink_primary


class _Plan:
    """One optimizer's distributed layout: its variables, strategy, update plan and twins."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list):
        self.params = params
        self.key = tuple(id(p) for p in params)
        self.index = {id(p): i for i, p in enumerate(params)}
        self._optimizer = weakref.ref(optimizer)
        # each local replica's view of optimizer.state in a run, and what it needs (replica_state.attach)
        self.state_views: list | None = None
        self.generations: list[int] = []
        self.snapshots: dict = {}
        self.snapshot_lock = threading.Lock()
        self.variable_of: dict | None = None
        # Plain tensors beside the distributed variables (a bare nn.Parameter, one built outside the scope):
        # every replica's backward adds into its one .grad, so each step checks these (usually none).
        self.plain = [p for p in params if not isinstance(p, DistributedVariable)]
        self.strategy = replica_update.strategy_of(params, f"Optimizer {type(optimizer).__name__}")
        extended = self.strategy.extended
        self.devices = extended.torch_devices
        self.engine = replica_update.choose(params, self.strategy, elementwise=replica_update.is_elementwise(optimizer))
        # Each variable updated on one replica: one state, the user's (no copies to keep in step).
        self.one_state = len(self.devices) == 1 or self.engine.updates_once
        self.own_step = _written_outside_torch(optimizer)   # may set .data of its twin's tensors
        self.lock = threading.Lock()
        self.twins: list[torch.optim.Optimizer] = []
        self._built_for: tuple = (None, -1, None)   # the user's groups list, its length, its state dict
        # id(variable) -> the user's entry the copies hold, and its signature then (entry_signature)
        self._synced: dict[int, tuple] = {}
        #: Replicas off the CPU (GPUs): their first step's counters are moved to the host (``counters_on_host``).
        self.device_counters = any(d.type != "cpu" for d in self.devices)
        extended.add_run_preparer(self)   # (the optimizer's own attributes: ``before_run``)
        if len(self.devices) > 1:
            replica_state.attach(optimizer, self, between_runs=False)

    def twin_for(self, optimizer: torch.optim.Optimizer, replica_id: int) -> torch.optim.Optimizer:
        """Replica ``replica_id``'s twin, with the user's current hyperparameters."""
        if not self.built_over(optimizer.param_groups, optimizer.state):
            with self.lock:
                if not self.built_over(optimizer.param_groups, optimizer.state):
                    self._build(optimizer)
        twin = self.twins[replica_id]
        for user_group, group in zip(optimizer.param_groups, twin.param_groups):
            params = group["params"]
            group.update(user_group)
            if getattr(user_group, "_own", None) is not None:   # numbers some replica wrote in this run
                own = replica_values(user_group, replica_id)
                if own:
                    group.update(own)
            group["params"] = params
        return twin

    def built_over(self, groups: list, state: Any = None) -> bool:
        """Whether the twins were built for these user groups (no group added since) and, if given,
        this state dict (``load_state_dict`` and checkpoint restores replace both)."""
        built = self._built_for
        return built[0] is groups and built[1] == len(groups) and (state is None or built[2] is state)

    def _build(self, optimizer: torch.optim.Optimizer) -> None:
        """New twins over the user's groups; replicas with their own state start from copies of the
        user's. Published whole: a replica never sees half-built twins."""
        groups, state = optimizer.param_groups, optimizer.state
        twins = []
        leaf_of = [{id(p): local_copy(p, r) for p in self.params} for r in range(len(self.devices))]
        own = [None if r == 0 or self.one_state else d for r, d in enumerate(self.devices)]   # replicas' own state
        for r, device in enumerate(self.devices):
            twin_groups = [dict(g, params=[local_copy(p, r) for p in g["params"]]) for g in groups]
            if r == 0 or self.one_state:
                twin_state: Any = _StateByVariable(state, [(local_copy(p, r), p) for p in self.params])
            else:
                twin_state = defaultdict(dict)
                for p in self.params:
                    if dict.get(state, p):   # (dict's: the canonical entries, from a replica's thread too)
                        twin_state[local_copy(p, r)] = copy_state_entry(dict.get(state, p), device)
            twins.append(_make_twin(optimizer, twin_groups, twin_state, leaf_of[r], own[r]))
        self.attributes = TwinAttributes(optimizer, twins, leaf_of, own)
        self.twins = twins
        self._counted = [-1] * len(self.devices)     # len(twin's state) when its step counters were placed
        self._note_synced(state)
        self._built_for = (groups, len(groups), state)

    def counters_on_host(self, replica_id: int) -> None:
        """torch keeps a (not capturable, not fused) optimizer's ``step`` counters on the CPU, so reading one costs
        no GPU sync; a replica's device scope put those its first step made on the replica's GPU (the placement
        mode fills in the device of ``torch.tensor(0.0)``), and every later step synced host and device once per
        parameter (111 syncs a step: transformer, AdamW, 2 logical GPUs of an H200). Moved once, after the step
        that made them (a step only adds entries: an unchanged length means none)."""
        twin = self.twins[replica_id]
        # (replica 0's state, and every replica's where one replica updates each variable, is the user's dict)
        entries = self._built_for[2] if isinstance(twin.state, _StateByVariable) else twin.state
        if dict.__len__(entries) == self._counted[replica_id]:
            return
        self._counted[replica_id] = dict.__len__(entries)
        if any(g.get("capturable") or g.get("fused") for g in twin.param_groups):
            return
        for entry in dict.values(entries):
            step = entry.get("step") if isinstance(entry, dict) else None
            if isinstance(step, torch.Tensor) and step.dim() == 0 and step.device.type != "cpu":
                entry["step"] = step.to("cpu")

    def _note_synced(self, state: dict) -> None:
        self._synced = {id(p): (entry, entry_signature(entry)) for p in self.params for entry in (dict.get(state, p),)}

    def after_step(self, replica_id: int) -> None:
        """Replica 0 notes what its step wrote in the user's state (new entries, tensors updated in place:
        the replicas with their own copies did the same to theirs), so ``before_run`` tells those from
        what the user writes between runs (an entry replaced, or written into: a momentum reset). A replica's
        copies of entries others own are stale after its step (``replica_state``: ``generations``)."""
        if replica_id is not None and self.state_views is not None and self.one_state:
            self.generations[replica_id] += 1
        if replica_id == 0 and self.twins and self._optimizer() is not None:   # (TwinAttributes)
            user, given = self._optimizer(), self.attributes.given
            for k, v in self.twins[0].__dict__.items():
                if k in given and v is not given[k] and type(v) not in (list, tuple, dict):
                    user.__dict__[k] = given[k] = self.attributes.users[k] = v   # replica 0's rebound value: the user's
        if replica_id == 0 and not self.one_state:
            self._note_synced(self._built_for[2])

    def before_run(self) -> None:
        """Before ``strategy.run`` (caller thread, replicas idle): state entries the user wrote or
        deleted in cross-replica context reach the replicas that keep their own copies; ``optimizer.state``
        shows each replica its own entries in the run (``replica_state``)."""
        optimizer, state = self._optimizer(), self._built_for[2]
        if optimizer is not None:
            replica_state.attach(optimizer, self)
            if self.twins:
                self.attributes.before_run(optimizer, self.twins)
        if state is None or self.one_state:
            return
        for p in self.params:
            entry = dict.get(state, p)
            synced = self._synced.get(id(p))
            signature = entry_signature(entry)
            if synced is not None and entry is synced[0] and signature == synced[1]:
                continue
            for r in range(1, len(self.twins)):
                own, local = self.twins[r].state, local_copy(p, r)
                if entry:
                    own[local] = copy_state_entry(entry, self.devices[r])
                else:
                    own.pop(local, None)
            self._synced[id(p)] = (entry, signature)


_plans: "weakref.WeakKeyDictionary[torch.optim.Optimizer, _Plan | None]" = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()
_plain: "weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple]" = weakref.WeakKeyDictionary()


def _plan_for(optimizer: torch.optim.Optimizer) -> _Plan | None:
    """The optimizer's plan (None: it holds no distributed variable), made again when its
    variables change."""
    groups = optimizer.param_groups
    seen = _plain.get(optimizer)
    if seen is not None and seen[0] is groups and seen[1] == len(groups):
        return None  # fast path for plain torch optimizers: checked before, groups unchanged
    plan = _plans.get(optimizer, False)
    if plan and plan.built_over(groups):
        return plan  # fast path: twins built for these groups
    params = [p for g in groups for p in g["params"]]
    lazy_modules.refuse_stale(optimizer, params)   # built before a lazy module's first forward pass
    distributed = any(isinstance(p, DistributedVariable) for p in params)
    if not distributed:
        _plain[optimizer] = (groups, len(groups))
        if plan is None:
            return None
    key = tuple(id(p) for p in params)
    if plan and plan.key == key:
        return plan
    env = _replica_env()
    if distributed and env is not None:
        scripted_modules.refuse(optimizer, params, env.strategy)
    with _plans_lock:
        plan = _plans.get(optimizer, False)
        if not plan or plan.key != key:
            plan = _Plan(optimizer, params) if distributed else None
            _plans[optimizer] = plan
    return plan


def _pre_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> tuple | None:
    if compiled_step.under_dynamo():   # called from torch.compile'd code: the whole step, eagerly
        return compiled_step.step_eagerly(optimizer, args, kwargs, _replica_pre_step, _replica_post_step,
                                          lambda: _calls_closure(optimizer))
    return _replica_pre_step(optimizer, args, kwargs)


def _calls_closure(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the optimizer's ``step`` calls its closure itself (LBFGS, a step written outside torch)."""
    plan = _plan_for(optimizer)
    return plan is not None and (isinstance(optimizer, torch.optim.LBFGS) or plan.own_step)


def _replica_pre_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> tuple | None:
    plan = _plan_for(optimizer)
    if plan is None:
        if not getattr(optimizer, "_multidev_twin", False):   # a twin's tensors are replicas' own
            evaluates = (args[1] if len(args) > 1 else kwargs.get("closure")) is not None
            # a model built before the strategy existed; LBFGS over Neural Transfer's plain input image
            module_hooks.refuse_shared_parameters(optimizer, closure=evaluates)
        return None
    env = _replica_env()   # (the ContextVar's own get: no Python call)
    if env is None:
        raise RuntimeError(
            f"{type(optimizer).__name__}.step() over variables created in {type(plan.strategy).__name__}.scope() "
            "cannot be called in cross-replica context: call it inside strategy.run(train_step, ...) so every "
            "replica's gradients are summed and every copy is updated."
        )
    if plan.plain:
        module_hooks.refuse_shared_parameters(optimizer, plan.plain)
    replica_id = env.replica_id
    closure = args[1] if len(args) > 1 else kwargs.get("closure")
    if closure is not None:
        closure = _global_loss(closure, env)
        if isinstance(optimizer, torch.optim.LBFGS) or plan.own_step:   # it calls its closure itself
            return _closure_steps(optimizer, plan, replica_id, closure, env)
        with torch.enable_grad():   # the step's one evaluation, before its gradients are applied
            loss = closure()
        once = _evaluated_once(optimizer, loss)
        if len(args) > 1:
            args = (args[0], once) + tuple(args[2:])
        else:
            kwargs = dict(kwargs, closure=once)
    twin = plan.twin_for(optimizer, replica_id)
    # LocalGrads, or SummedGrads once loss.backward() reduced them (backward_reduce): never summed twice.
    if shared_leaves.WATCHES:   # a step function's first runs (no call on the others)
        reduced_grads.refuse_diverged(optimizer, plan.engine, env)
    grads = env.replica_step.gradients(tuple(t.grad for t in plan.engine.refs[replica_id]))
    plan.engine.reduce_as_grads(replica_id, grads)
    return (twin,) + tuple(args[1:]), kwargs


def _global_loss(closure: Callable, env: Any) -> Callable:
    """``closure`` whose loss is reduced across replicas (the mean of torch's mean losses, the sum of
    ``compute_average_loss``'s shares): the global batch's loss, one device's, on every replica, so an
    optimizer that decides on it (LBFGS's tolerance and line search) decides alike everywhere. Its
    ``loss.backward()`` reduces the gradients (``backward_reduce``)."""
    def evaluate() -> Any:
        loss = closure()
        if loss is None:
            return None
        value = torch.as_tensor(loss).detach()
        reduced = env.replica_context.all_reduce(env.replica_step.loss_reduction, value)
        return reduced if isinstance(loss, torch.Tensor) else type(loss)(reduced)
    return evaluate


def _evaluated_once(optimizer: torch.optim.Optimizer, loss: Any) -> Callable:
    """The closure handed to an optimizer whose ``step`` evaluates it once: the loss evaluated before
    its gradients were applied. A second evaluation raises (it would need new gradients)."""
    calls = []

    def closure() -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise ValueError(
                f"{type(optimizer).__name__}.step(closure) evaluated the closure twice inside strategy.run: multidev "
                "evaluates it once before the step (torch's optimizers do), to reduce its gradients across replicas "
                "before they are applied. Override step() in your subclass (a step written outside torch gets the "
                "closure itself and may call it again), or call loss.backward() and then optimizer.step().")
        return loss
    return closure


def _written_outside_torch(optimizer: torch.optim.Optimizer) -> bool:
    """A ``step`` written outside torch calls its closure when it needs to, as LBFGS does again and again:
    SAM's ``step`` climbs to ``w + e(w)`` first and evaluates the closure there. Evaluating it once before
    such a step (as for torch's optimizers) added a second backward at ``w`` and left SAM's own call
    without gradients: it trained 0.17 off one device after a step. Such a step may also set ``.data``
    of its twin's tensors (``_post_step`` re-links replica 0's copy)."""
    return not getattr(type(optimizer).step, "__module__", "torch.").startswith("torch.")


def _closure_steps(optimizer: torch.optim.Optimizer, plan: _Plan, replica_id: int, closure: Callable,
                   env: Any) -> tuple:
    """The optimizer calls the closure itself: every evaluation's ``loss.backward()`` reduces the
    gradients, so each replica's twin takes the same steps on its own copies (its ``step`` reads
    ``.grad`` between evaluations, which no pre-step reduction could give it); the gradients of a
    backward before the step (SAM's first) are reduced first. Only a plan where every replica applies
    the update allows that."""
    if type(plan.engine) not in (replica_update.BucketPlan, replica_update.UpdatePlan):
        how = ("re-evaluates the closure between updates" if isinstance(optimizer, torch.optim.LBFGS)
               else "evaluates the closure inside its own step")
        raise ValueError(
            f"{type(optimizer).__name__}.step(closure) cannot run on {type(plan.strategy).__name__}: its replicas "
            f"update one shared copy ({type(plan.engine).__name__}), and {type(optimizer).__name__} {how}. Use "
            "MirroredStrategy (each replica updates its own copy), or an optimizer without a closure.")
    twin = plan.twin_for(optimizer, replica_id)
    if not isinstance(optimizer, torch.optim.LBFGS):
        grads = env.replica_step.gradients(tuple(t.grad for t in plan.engine.refs[replica_id]))
        plan.engine.reduce_as_grads(replica_id, grads)
    return (twin, closure), {}


def update_plan(optimizer: torch.optim.Optimizer) -> replica_update.UpdatePlan:
    """The update plan ``optimizer.step()`` uses in replica context (``IDENTITY`` for an optimizer over
    no distributed variable), chosen once per optimizer and its variables."""
    plan = _plan_for(optimizer)
    return replica_update.IDENTITY if plan is None else plan.engine


def replica_optimizer(optimizer: torch.optim.Optimizer, replica_id: int) -> torch.optim.Optimizer:
    """What replica ``replica_id``'s ``optimizer.step()`` updates (its twin; ``optimizer`` itself
    when it holds no distributed variable): for tests and inspection."""
    plan = _plan_for(optimizer)
    return optimizer if plan is None else plan.twin_for(optimizer, replica_id)


def _post_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    if not compiled_step.under_dynamo():   # (under dynamo the pre-hook published already)
        _replica_post_step(optimizer, args, kwargs)


def _replica_post_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    plan = _plans.get(optimizer)
    if plan is None:
        return
    env = _replica_env()
    replica_id = None if env is None else env.replica_id
    plan.engine.publish(replica_id)
    if plan.device_counters and replica_id is not None and plan.twins:
        plan.counters_on_host(replica_id)
    plan.after_step(replica_id)   # (after the counters' move: it notes the entries as the step leaves them)
    if replica_id == 0 and plan.own_step:
        for p in plan.params:
            if isinstance(p, DistributedVariable):
                relink_primary(p)


def install() -> Callable[[], None]:
    """Register the global optimizer hooks; returns how to remove them (``live_hooks.STRATEGY_HOOKS``
    calls both while strategies live)."""
    handles = [torch_optimizer.register_optimizer_step_pre_hook(_pre_step),
               torch_optimizer.register_optimizer_step_post_hook(_post_step)]
    return lambda: [h.remove() for h in handles]
