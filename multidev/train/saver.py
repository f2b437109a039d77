"""Object graph -> (JSON description, tensors): what ``Checkpoint.write`` stores.

Every variable is stored once, as its canonical value: a distributed variable's value read in
cross-replica context (a ``MirroredVariable``'s primary copy, a ``SyncOnReadVariable``'s reduced
value), so the checkpoint does not depend on the strategy or the number of replicas or workers.
Optimizer slots name their variable by its storage key, so they find it again on restore.

Example:
    objects, tensors = collect(md.train.Checkpoint(model=model, optimizer=opt))
    objects["model"]["tensors"]      # {'layers.0.kernel': 'model:layers.0.kernel', ...}
"""

from __future__ import annotations

import json

import torch

from multidev.train import torch_states
from multidev.train import trackables as T
from multidev.values.variables import Variable


def canonical_value(t: torch.Tensor) -> torch.Tensor:
    """One plain copy of a variable's value (cross-replica read for distributed variables)."""
    if isinstance(t, Variable):
        return t.read_value()
    return t.detach().clone()


def collect(root) -> tuple[dict, dict[str, torch.Tensor]]:
    """``({path: node description}, {storage key: tensor})`` for the graph under ``root``."""
    nodes = T.walk(root)
    torch_states.warn_untracked_schedulers([(n.path, n.obj) for n in nodes if n.kind == T.TORCH_OPTIMIZER],
                                           [n.obj for n in nodes if n.kind == T.TORCH_STATE])
    objects, tensors, var_keys = {}, {}, {}
    # Variables first, optimizers second: slots refer to the variables' keys.
    for node in sorted(nodes, key=lambda n: n.kind in (T.KERAS_OPTIMIZER, T.TORCH_OPTIMIZER)):
        if node.alias_of is not None:
            objects[node.path] = {"alias": node.alias_of}
            continue
        objects[node.path] = _SAVERS[node.kind](node, var_keys, tensors)
    return objects, tensors


def _add(node_path: str, local: str, t: torch.Tensor, var_keys: dict, tensors: dict) -> str:
    """Store ``t`` once; a tensor met before keeps its first key."""
    if id(t) in var_keys:
        return var_keys[id(t)]
    key = T.storage_key(node_path, local)
    var_keys[id(t)] = key
    tensors[key] = canonical_value(t)
    return key


def _save_checkpoint(node, var_keys, tensors) -> dict:
    return {"kind": T.CHECKPOINT, "children": list(node.obj._trackable_children())}


def _save_module(node, var_keys, tensors) -> dict:
    local = {name: _add(node.path, name, t, var_keys, tensors) for name, t in T.module_tensors(node.obj).items()}
    return {"kind": T.MODULE, "class": type(node.obj).__name__, "tensors": local}


def _save_tensors(node, var_keys, tensors) -> dict:
    local = {name: _add(node.path, name, t, var_keys, tensors) for name, t in T.named_tensors(node.obj).items()}
    return {"kind": T.TENSORS, "class": type(node.obj).__name__, "tensors": local}


def _save_variable(node, var_keys, tensors) -> dict:
    return {"kind": T.VARIABLE, "tensors": {"value": _add(node.path, "value", node.obj, var_keys, tensors)}}


def _save_iterator(node, var_keys, tensors) -> dict:
    key = T.storage_key(node.path, "position")
    tensors[key] = torch.tensor(int(node.obj._position), dtype=torch.int64)
    return {"kind": T.ITERATOR, "tensors": {"position": key}}


def _save_keras_optimizer(node, var_keys, tensors) -> dict:
    names = {i: key for i, key in var_keys.items()}
    local = {}
    for name, t in node.obj.state_tensors(names).items():
        key = T.storage_key(node.path, name)
        tensors[key] = t
        local[name] = key
    if isinstance(node.obj.learning_rate, Variable):      # Keras tracks its learning-rate variable
        local["learning_rate"] = _add(node.path, "learning_rate", node.obj.learning_rate, var_keys, tensors)
    return {"kind": T.KERAS_OPTIMIZER, "class": type(node.obj).__name__, "tensors": local}


def param_ref(p, group: int, index: int, var_keys: dict) -> str:
    """How a torch.optim state entry names its parameter: its variable's key, else its position."""
    return var_keys.get(id(p), f"#{group}.{index}")


def _save_torch_optimizer(node, var_keys, tensors) -> dict:
    opt = node.obj
    local, scalars, groups, params = {}, {}, [], []
    for g, group in enumerate(opt.param_groups):
        groups.append({k: v for k, v in group.items() if k != "params" and _jsonable(v)})
        params.append([param_ref(p, g, i, var_keys) for i, p in enumerate(group["params"])])
        for i, p in enumerate(group["params"]):
            ref = params[g][i]
            for slot, value in opt.state.get(p, {}).items():
                if isinstance(value, torch.Tensor):
                    name = f"state/{ref}/{slot}"
                    key = T.storage_key(node.path, name)
                    tensors[key] = value.detach().clone()
                    local[name] = key
                elif _jsonable(value):
                    scalars[f"{ref}/{slot}"] = value
    return {"kind": T.TORCH_OPTIMIZER, "class": type(opt).__name__, "tensors": local, "scalars": scalars,
            "param_groups": groups, "params": params}


def _save_torch_state(node, var_keys, tensors) -> dict:
    return torch_states.encode(node.obj, node.path, tensors, T.storage_key)


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_SAVERS = {T.CHECKPOINT: _save_checkpoint, T.MODULE: _save_module, T.VARIABLE: _save_variable,
           T.ITERATOR: _save_iterator, T.KERAS_OPTIMIZER: _save_keras_optimizer,
           T.TORCH_OPTIMIZER: _save_torch_optimizer, T.TENSORS: _save_tensors, T.TORCH_STATE: _save_torch_state}
