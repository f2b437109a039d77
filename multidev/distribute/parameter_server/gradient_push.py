"""Optimizers over ps variables push gradients to the parameter servers instead of stepping locally.

A global ``torch.optim`` pre-step hook (active for any optimizer, Keras's included; registered while
the process is connected to a cluster: ``connect``/``disconnect``) finds the
``PSVariable`` parameters, sends each ps the gradients of its shards together with how to rebuild
the optimizer (class, defaults, group hyperparameters), and clears the local gradients so the local
step changes nothing. Each ps applies its share at once, without waiting for other workers; the
optimizer state (momenta, Adam moments) therefore lives on the parameter servers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

import torch
from torch.optim import optimizer as torch_optimizer

from multidev.distribute import live_hooks
from multidev.distribute.parameter_server import client as client_mod
from multidev.distribute.parameter_server.ps_service import OptimizerSpec, RowGradient
from multidev.distribute.parameter_server.variables import PSVariable


def _groups(optimizer: torch.optim.Optimizer) -> list[dict]:
    return list(list.__iter__(optimizer.param_groups))


def _check_params(optimizer: torch.optim.Optimizer, groups: list[dict]) -> bool:
    """True when the optimizer trains ps variables; ValueError when it mixes them with local ones."""
    params = [p for g in groups for p in g["params"]]
    remote = sum(isinstance(p, PSVariable) for p in params)
    if remote == 0:
        return False
    if remote != len(params):
        local = [tuple(p.shape) for p in params if not isinstance(p, PSVariable)][:3]
        raise ValueError(
            f"{type(optimizer).__name__} mixes variables stored on parameter servers with {len(params) - remote} "
            f"local ones (shapes {local}...). Create every variable, and build the model (e.g. "
            "model.build(input_shape)), inside ParameterServerStrategy.scope() on the coordinator: variables "
            "created inside a scheduled function stay local to one worker."
        )
    return True


_ROWS_MIN = 1024  # tables with at least this many rows push only the rows a step touched


def _dense(grad: torch.Tensor) -> torch.Tensor:
    return grad.to_dense() if grad.is_sparse else grad


def _compact(grad: torch.Tensor) -> Any:
    """A shard's gradient as sent: dense, or ``RowGradient`` when at most half of a big table's rows
    are non-zero (an embedding step touches few rows)."""
    if grad.dim() < 2 or grad.shape[0] < _ROWS_MIN:
        return grad.detach()
    rows = grad.detach().reshape(grad.shape[0], -1).ne(0).any(dim=1).nonzero().flatten()
    if rows.numel() * 2 > grad.shape[0]:
        return grad.detach()
    return RowGradient(rows, grad.detach().index_select(0, rows), tuple(grad.shape))


def _requests(optimizer: torch.optim.Optimizer, groups: list[dict]) -> dict[int, tuple[OptimizerSpec, dict]]:
    num_ps = client_mod.current_client().num_ps
    per_ps_groups: dict[int, list] = defaultdict(lambda: [({}, []) for _ in groups])
    grads: dict[int, dict[int, torch.Tensor]] = defaultdict(dict)
    for gi, group in enumerate(groups):
        hyper = {k: v for k, v in group.items() if k != "params"}
        for ps in range(num_ps):
            per_ps_groups[ps][gi] = (hyper, [])
        for param in group["params"]:
            grad = param.grad
            for shard, _ in param._pieces():
                per_ps_groups[shard.ps][gi][1].append(shard.vid)
                if grad is not None:
                    g = _dense(grad)
                    grads[shard.ps][shard.vid] = _compact(g if shard.start is None else g[shard.start:shard.end])
    cls, defaults = type(optimizer), dict(optimizer.defaults)
    return {ps: (OptimizerSpec(cls, defaults, per_ps_groups[ps]), grads[ps]) for ps in grads}


def _pre_step(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    groups = _groups(optimizer)
    if not _check_params(optimizer, groups):
        return None
    requests = _requests(optimizer, groups)
    if requests:
        client_mod.current_client().apply_gradients(requests)
    for group in groups:
        for param in group["params"]:
            param.grad = None
    return None


def _install() -> Callable[[], None]:
    return torch_optimizer.register_optimizer_step_pre_hook(_pre_step).remove


_HOOKS = live_hooks.OwnedHooks("parameter-server gradient push", [_install])
_leases: list = []   # the current client's


def connect(client: client_mod.PSClient) -> None:
    """Make ``client`` this process's ps client (the coordinator's strategy, a worker's server); the
    step pre-hook is registered from now until ``disconnect``."""
    disconnect()
    _leases.append(_HOOKS.acquire(client))
    client_mod.set_client(client)


def disconnect() -> None:
    """Leave: no current client, and the step pre-hook removed (idempotent)."""
    client_mod.set_client(None)
    while _leases:
        _leases.pop()()


__all__ = ["connect", "disconnect"]
