"""(JSON description, tensors) -> values in the live object graph: what ``Checkpoint.read`` does.

Objects are matched by their path from the root and variables by their name within the object,
as TensorFlow matches its object graph. A restore is planned first (every shape checked) and
then applied, so a mismatch changes nothing. Values for variables not created yet, and for
``Checkpoint`` attributes not assigned yet, wait (``deferred``) and land on creation.

Example:
    objects, tensors = graph["objects"], tensors
    restore(ckpt, objects, tensors, status)
"""

from __future__ import annotations

import collections
import dataclasses

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.train import deferred
from multidev.train import torch_states
from multidev.train import trackables as T
from multidev.values.variables import Variable


@dataclasses.dataclass
class _Plan:
    assignments: list = dataclasses.field(default_factory=list)   # (target, value, key)
    actions: list = dataclasses.field(default_factory=list)       # fn() after the assignments
    consumed: list = dataclasses.field(default_factory=list)      # keys used by the actions
    defers: list = dataclasses.field(default_factory=list)        # (module, name, PendingValue)
    children: list = dataclasses.field(default_factory=list)      # (checkpoint, name, path)
    unmatched: list = dataclasses.field(default_factory=list)
    key_to_var: dict = dataclasses.field(default_factory=dict)    # saved key -> live variable
    pending: dict = dataclasses.field(default_factory=dict)       # saved key -> PendingValue


@dataclasses.dataclass
class PendingChild:
    """A saved ``Checkpoint`` attribute waiting to be assigned."""

    key: str                 # the attribute's path; every value stored under it waits
    done: bool = False
    keys: frozenset | None = None   # the values waiting, where they are not stored under the path (module parts)

    def waiting_keys(self, unused: set) -> set:
        """The unconsumed keys stored under this attribute."""
        if self.done:
            return set()
        if self.keys is not None:
            return set(self.keys) & unused
        return {k for k in unused if k.startswith((self.key + ":", self.key + "/"))}


def restore(root, objects: dict, tensors: dict, status, base_path: str = "") -> None:
    """Restore the graph under ``root`` (at ``base_path``) from a checkpoint's objects and tensors."""
    plan = _Plan()
    nodes = [n for n in T.walk(root, base_path) if n.alias_of is None]
    for node in sorted(nodes, key=lambda n: n.kind in (T.KERAS_OPTIMIZER, T.TORCH_OPTIMIZER)):
        saved = lookup(objects, node.path)
        if saved is not None and node.kind == T.CHECKPOINT and saved.get("kind") == T.MODULE:
            status._matched.add(node.path)     # a Checkpoint standing for a saved module: children match by path
            _plan_module_view(node, saved, plan)
            continue
        if saved is None or saved.get("kind") != node.kind:
            if node.kind != T.CHECKPOINT or node.path:
                plan.unmatched.append(node.path or "(root)")
            continue
        _PLANNERS[node.kind](node, saved, tensors, plan, status)
        status._matched.add(node.path)
    _check_shapes(plan)
    for target, value, key in plan.assignments:
        deferred.assign(target, value)
        status._consume(key)
    for action in plan.actions:
        action()
    for key in plan.consumed:
        status._consume(key)
    for module, name, pending in plan.defers:
        deferred.defer(module, name, pending)
        status._pending.append(pending)
    for ckpt, name, path, keys in plan.children:
        child = PendingChild(path, keys=keys)
        status._pending.append(child)
        ckpt._defer_child(name, lambda obj, p=path, c=child: _restore_child(obj, p, c, objects, tensors, status))
    status._unmatched.extend(plan.unmatched)


def _resolved(objects: dict, path: str):
    saved = objects.get(path)
    return objects.get(saved["alias"]) if saved is not None and "alias" in saved else saved


def lookup(objects: dict, path: str) -> dict | None:
    """The saved description for ``path``; below a saved module, a view of it: ``net/l1`` is the
    sub-module ``l1`` (its tensors ``l1.*``), ``net/l1/bias`` the variable ``l1.bias`` (as TF
    matches a layer's attributes), so parts of a model restore into other objects."""
    saved = _resolved(objects, path)
    if saved is not None:
        return saved
    parts = path.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        owner = _resolved(objects, "/".join(parts[:cut]))
        if owner is None:
            continue
        if owner.get("kind") != T.MODULE:
            return None
        rest, local = ".".join(parts[cut:]), owner["tensors"]
        if rest in local:
            return {"kind": T.VARIABLE, "tensors": {"value": local[rest]}}
        sub = {name[len(rest) + 1:]: key for name, key in local.items() if name.startswith(rest + ".")}
        return {"kind": T.MODULE, "tensors": sub} if sub else None
    return None


def _restore_child(obj, path, child, objects, tensors, status) -> None:
    child.done = True
    restore(obj, objects, tensors, status, base_path=path)


def _check_shapes(plan: _Plan) -> None:
    """Every value fits its variable (shape, then dtype: TensorFlow never casts a restored value, it
    raises InvalidArgumentError); a mismatch raises before anything is assigned."""
    bad = [f"{key}: checkpoint {tuple(value.shape)} vs variable {tuple(target.shape)}"
           for target, value, key in plan.assignments if tuple(target.shape) != tuple(value.shape)]
    if bad:
        raise ValueError("Received incompatible tensor shapes when restoring from a checkpoint; nothing was "
                         "restored:\n  " + "\n  ".join(bad) + "\nBuild the same architecture that was saved.")
    mismatched = [(target.dtype, value.dtype, key) for target, value, key in plan.assignments
                  if target.dtype != value.dtype]
    if mismatched:
        bad = [f"{key}: expected dtype {_name(expected)} does not equal original dtype {_name(original)}"
               for expected, original, key in mismatched]
        # md.Variable(<Python int>) was int64 before it became TF's int32 (2026-11-27): a step counter saved then.
        older = ("\nmultidev before 2026-11-27 made md.Variable(<Python int>) int64 where TensorFlow and multidev now "
                 "make it int32: read such a checkpoint with md.Variable(0, dtype=md.int64)."
                 if any(pair[:2] == (torch.int32, torch.int64) for pair in mismatched) else "")
        raise InvalidArgumentError("Received tensors of another dtype than their variables' when restoring from a "
                                   "checkpoint; nothing was restored:\n  " + "\n  ".join(bad) + "\nCreate the "
                                   "variables with the dtypes they were saved with (a checkpoint never casts)." + older)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _plan_checkpoint(node, saved, tensors, plan, status) -> None:
    live = node.obj._trackable_children()
    for name in saved.get("children", []):
        if name not in live:
            plan.children.append((node.obj, name, T.child_path(node.path, name), None))


def _plan_module_view(node, saved, plan) -> None:
    """A ``Checkpoint`` standing for a saved module (the guide's ``fake_layer``): a part of the module
    (``kernel``, ``l1``) not assigned to it yet waits, and lands when assigned (TF's delayed restoration)."""
    live = node.obj._trackable_children()
    parts: dict = collections.defaultdict(set)
    for local, key in saved["tensors"].items():
        parts[local.split(".", 1)[0]].add(key)
    for name, keys in parts.items():
        if name not in live:
            plan.children.append((node.obj, name, T.child_path(node.path, name), frozenset(keys)))


def _plan_variable(node, saved, tensors, plan, status) -> None:
    key = saved["tensors"]["value"]
    plan.assignments.append((node.obj, tensors[key], key))
    plan.key_to_var[key] = node.obj


def _plan_module(node, saved, tensors, plan, status) -> None:
    live = T.module_tensors(node.obj)
    modules = None
    for local, key in saved["tensors"].items():
        if local in live:
            plan.assignments.append((live[local], tensors[key], key))
            plan.key_to_var[key] = live[local]
            continue
        owner_path, _, name = local.rpartition(".")
        modules = dict(node.obj.named_modules()) if modules is None else modules
        owner = modules.get(owner_path)   # (module paths, not attributes: Keras's `layers` is a list)
        if owner is None:
            continue                      # no such layer: the value stays unused
        pending = deferred.PendingValue(tensors[key], key, status)
        plan.defers.append((owner, name, pending))
        plan.pending[key] = pending
    plan.unmatched += [T.storage_key(node.path, n) for n in live if n not in saved["tensors"]]


def _plan_tensors(node, saved, tensors, plan, status) -> None:
    """A front end's named tensors (``trackables.register_tensor_source``); a saved name with no live
    tensor (an optimizer not built yet) stays unconsumed, as ``assert_consumed`` then reports."""
    live = T.named_tensors(node.obj)
    for local, key in saved["tensors"].items():
        if local in live:
            plan.assignments.append((live[local], tensors[key], key))
            plan.key_to_var[key] = live[local]
    plan.unmatched += [T.storage_key(node.path, n) for n in live if n not in saved["tensors"]]


def _plan_iterator(node, saved, tensors, plan, status) -> None:
    key = saved["tensors"]["position"]
    position = int(tensors[key])
    plan.actions.append(lambda: node.obj._restore_position(position))
    plan.consumed.append(key)


def _plan_keras_optimizer(node, saved, tensors, plan, status) -> None:
    opt, local = node.obj, saved["tensors"]
    iterations = tensors[local["iterations"]]
    plan.assignments.append((opt.iterations, iterations, local["iterations"]))
    if "learning_rate" in local and isinstance(opt.learning_rate, Variable):
        plan.assignments.append((opt.learning_rate, tensors[local["learning_rate"]], local["learning_rate"]))
    slots = collections.defaultdict(dict)
    known = opt.slot_names()      # another optimizer's slots (Adam's into SGD) stay unconsumed, as in TF
    for name, key in local.items():
        if "/" in name:
            var_key, slot = name.rsplit("/", 1)
            if known is None or slot in known:
                slots[var_key][name] = key
    ready = {}
    for var_key, entries in slots.items():
        if var_key in plan.key_to_var:
            ready.update({name: tensors[key] for name, key in entries.items()})
            plan.consumed += list(entries.values())
        elif var_key in plan.pending:
            plan.pending[var_key].callbacks.append(_slot_loader(opt, var_key, entries, tensors, status))
            plan.pending[var_key].dependents += list(entries.values())
    if ready:
        variables = {name.rsplit("/", 1)[0]: plan.key_to_var[name.rsplit("/", 1)[0]] for name in ready}
        plan.actions.append(lambda: opt.load_state_tensors(dict(ready, iterations=iterations), variables))


def _slot_loader(opt, var_key, entries, tensors, status):
    def load(variable):
        opt.load_state_tensors(dict({n: tensors[k] for n, k in entries.items()}, iterations=opt.iterations.clone()),
                               {var_key: variable})
        for key in entries.values():
            status._consume(key)
    return load


def _plan_torch_optimizer(node, saved, tensors, plan, status) -> None:
    opt = node.obj
    var_to_key = {id(v): k for k, v in plan.key_to_var.items()}
    by_ref = collections.defaultdict(dict)
    for name, key in saved["tensors"].items():
        ref, slot = name[len("state/"):].rsplit("/", 1)
        by_ref[ref][slot] = key
    for ref_slot, value in saved.get("scalars", {}).items():
        ref, slot = ref_slot.rsplit("/", 1)
        by_ref[ref][slot] = value
    updates, positions = [], saved.get("params", [])
    for g, group in enumerate(opt.param_groups):
        for i, p in enumerate(group["params"]):
            # By the variable the state belongs to; else by position (the optimizer saved or
            # restored without the module that owns its parameters).
            entries = by_ref.get(var_to_key.get(id(p), f"#{g}.{i}"))
            if entries is None and g < len(positions) and i < len(positions[g]):
                entries = by_ref.get(positions[g][i])
            if entries:
                updates.append((p, {slot: tensors[v] if isinstance(v, str) else v for slot, v in entries.items()}))
                plan.consumed += [v for v in entries.values() if isinstance(v, str)]
    plan.actions.append(lambda: _load_torch_optimizer(opt, updates, saved.get("param_groups", [])))


def _load_torch_optimizer(opt, updates, groups) -> None:
    """Install the state as torch's ``load_state_dict`` does (a fresh dict; floats in the
    parameter's dtype and device, ``step`` kept as saved)."""
    state = collections.defaultdict(dict, {p: dict(entry) for p, entry in opt.state.items()})
    for p, entries in updates:
        for slot, value in entries.items():
            if isinstance(value, torch.Tensor) and slot != "step":
                value = value.to(p.device, p.dtype if value.is_floating_point() else value.dtype)
            state[p][slot] = value.clone() if isinstance(value, torch.Tensor) else value
    opt.state = state
    if len(groups) == len(opt.param_groups):
        for saved, group in zip(groups, opt.param_groups):
            for k, v in saved.items():
                if k in group:
                    group[k] = tuple(v) if isinstance(group[k], tuple) and isinstance(v, list) else v


def _plan_torch_state(node, saved, tensors, plan, status) -> None:
    """A scheduler's or ``GradScaler``'s ``state_dict`` goes back through its ``load_state_dict`` (another
    class's state, say a StepLR's into a OneCycleLR, is left alone: the object stays unmatched)."""
    if saved.get("class") != type(node.obj).__name__:
        plan.unmatched.append(node.path)
        return
    state, keys = torch_states.decode(saved, tensors)
    plan.actions.append(lambda: torch_states.load_state_dict(node.obj, state))
    plan.consumed += keys


_PLANNERS = {T.CHECKPOINT: _plan_checkpoint, T.MODULE: _plan_module, T.VARIABLE: _plan_variable,
             T.ITERATOR: _plan_iterator, T.KERAS_OPTIMIZER: _plan_keras_optimizer,
             T.TORCH_OPTIMIZER: _plan_torch_optimizer, T.TENSORS: _plan_tensors, T.TORCH_STATE: _plan_torch_state}
