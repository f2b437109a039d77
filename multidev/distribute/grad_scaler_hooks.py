"""``torch.amp.GradScaler`` inside ``strategy.run`` behaves as on one device (DDP's result).

A mixed-precision step calls ``scaler.scale(loss).backward()``, ``scaler.unscale_(opt)``,
``clip_grad_norm_``, ``scaler.step(opt)`` and ``scaler.update()`` in the step function. Under DDP
each process has its own scaler; here the replicas' threads share one, whose per-step bookkeeping
(``_per_optimizer_states``: "unscaled", "stepped", the inf checks) and scale would be advanced
once per replica. While a strategy lives (``live_hooks``) ``install`` wraps the four methods so
that, with several local replicas:

* each replica keeps its own bookkeeping on a *twin* (the user's settings and scale tensors, its
  own ``_per_optimizer_states``), so ``unscale_`` unscales that replica's gradients once and
  torch's "already called" checks hold per replica;
* the replicas agree on the inf check: an inf or NaN in any replica's gradients makes every replica
  skip ``optimizer.step()`` (under DDP the gradients are all-reduced, so every rank sees it; here
  ``loss.backward()`` reduces them too, and the agreement also covers gradients not reduced yet,
  such as gradients set by hand, which the optimizer step sums). With several workers the
  agreement spans them (one scalar all-reduce per ``unscale_``), so the wrappers act with one
  local replica too: a worker stepping where another skipped would meet the others' next step;
* ``update`` meets the replicas (``once_per_step.once``) and the last to arrive updates the scale
  and growth tracker once, from every replica's inf checks;
* the lazily made scale tensor is made once, on the first replica's device.

An optimizer with its own scale handling (``_step_supports_amp_scaling``: fused Adam) gets
unscaled gradients and a plain ``step`` inside replicas, the same update. ``update()`` after
``strategy.run`` (cross-replica context) takes the inf checks the replicas recorded. ``state_dict``,
``load_state_dict`` and ``get_scale`` act on the user's object, as torch wrote them.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import defaultdict
from typing import Any, Callable

import torch
from torch.amp import grad_scaler

from multidev.distribute import once_per_step

_GradScaler = grad_scaler.GradScaler
_READY, _STEPPED = grad_scaler.OptState.READY, grad_scaler.OptState.STEPPED
_ORIGINAL = {name: _GradScaler.__dict__[name] for name in ("scale", "unscale_", "step", "update")}

_lock = threading.Lock()
_twins: "weakref.WeakKeyDictionary[Any, dict[int, Any]]" = weakref.WeakKeyDictionary()


def _fresh_states() -> defaultdict:
    return defaultdict(grad_scaler._refresh_per_optimizer_state)


def _twin(scaler: Any, replica_id: int) -> Any:
    """Replica ``replica_id``'s view of ``scaler``: its settings and scale tensors, read now (a
    ``load_state_dict`` or the lazy init reaches it), with the replica's own per-optimizer states."""
    with _lock:
        twins = _twins.setdefault(scaler, {})
        twin = twins.get(replica_id)
        if twin is None:
            twin = twins[replica_id] = object.__new__(type(scaler))
            twin.__dict__["_per_optimizer_states"] = _fresh_states()
    states = twin._per_optimizer_states
    twin.__dict__.update(scaler.__dict__)
    twin.__dict__["_per_optimizer_states"] = states
    return twin


def _take_replica_states(scaler: Any) -> list[dict]:
    """Every twin's recorded per-optimizer states (replica order), cleared for the next step."""
    with _lock:
        twins = sorted(_twins.get(scaler, {}).items())
    taken = []
    for _, twin in twins:
        taken.extend(twin._per_optimizer_states.values())
        twin.__dict__["_per_optimizer_states"] = _fresh_states()
    return taken


def _local_replica(scaler: Any):
    """The replica environment when the wrappers must act (several replicas in all, local or on other
    workers; scaler enabled)."""
    env = once_per_step.several_replicas()
    return env if env is not None and scaler._enabled else None


def _scale(scaler: Any, outputs: Any) -> Any:
    env = _local_replica(scaler)
    if env is not None and scaler._scale is None:
        with _lock:
            if scaler._scale is None:
                scaler._lazy_init_scale_growth_tracker(env.strategy.extended.torch_devices[0])
    return _ORIGINAL["scale"](scaler, outputs)


def _found_inf(state: dict) -> bool:
    return any(bool(t) for t in state["found_inf_per_device"].values())


def _unscale_and_agree(scaler: Any, twin: Any, optimizer: Any, env: Any) -> dict:
    """Unscale this replica's gradients on its twin, then make every replica's inf check the same."""
    _ORIGINAL["unscale_"](twin, optimizer)
    state = twin._per_optimizer_states[id(optimizer)]
    found = _found_inf(state)
    if _anyone_found(env, optimizer, found) and not found:
        checks = state["found_inf_per_device"]
        for t in checks.values():
            t.fill_(1.0)
        if not checks:   # this replica had no gradient to check
            checks[scaler._scale.device] = torch.ones((), dtype=torch.float32, device=scaler._scale.device)
    return state


def _anyone_found(env: Any, optimizer: Any, found: bool) -> bool:
    """Whether any replica of any worker found an inf: the local replicas meet, the last to arrive
    asks the other workers (once per worker)."""
    return once_per_step.once(env, ("GradScaler.unscale_", type(optimizer).__name__), found,
                              lambda founds: once_per_step.sum_over_workers(env.strategy, float(any(founds))) > 0)


def _unscale_(scaler: Any, optimizer: Any) -> None:
    env = _local_replica(scaler)
    if env is None:
        return _ORIGINAL["unscale_"](scaler, optimizer)
    scaler._check_scale_growth_tracker("unscale_")
    _unscale_and_agree(scaler, _twin(scaler, env.replica_id), optimizer, env)


def _step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
    env = _local_replica(scaler)
    if env is None:
        return _ORIGINAL["step"](scaler, optimizer, *args, **kwargs)
    if "closure" in kwargs:
        raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
    scaler._check_scale_growth_tracker("step")
    twin = _twin(scaler, env.replica_id)
    state = twin._per_optimizer_states[id(optimizer)]
    if state["stage"] is _STEPPED:
        raise RuntimeError("step() has already been called since the last update().")
    if state["stage"] is _READY:
        state = _unscale_and_agree(scaler, twin, optimizer, env)
    # Every replica agreed on the inf check: all step (and meet in the update) or all skip.
    result = None if _found_inf(state) else optimizer.step(*args, **kwargs)
    state["stage"] = _STEPPED
    return result


def _update_from(scaler: Any, states: list[dict], new_scale: Any) -> None:
    """torch's ``update`` on the user's object over ``states`` (every replica's inf checks)."""
    if states:
        merged = _fresh_states()
        merged.update(enumerate(states))
        scaler._per_optimizer_states = merged
    _ORIGINAL["update"](scaler, new_scale)


def _update(scaler: Any, new_scale: Any = None) -> None:
    env = _local_replica(scaler)
    if env is None:
        if scaler._enabled and not scaler._per_optimizer_states:   # after strategy.run: the replicas' checks
            return _update_from(scaler, _take_replica_states(scaler), new_scale)
        return _ORIGINAL["update"](scaler, new_scale)
    twin = _twin(scaler, env.replica_id)
    mine = list(twin._per_optimizer_states.values())
    twin.__dict__["_per_optimizer_states"] = _fresh_states()

    def run(every: list) -> None:
        _update_from(scaler, [s for states, _ in every for s in states], every[0][1])

    once_per_step.once(env, ("GradScaler.update",), (mine, new_scale), run)


_WRAPPERS = {"scale": _scale, "unscale_": _unscale_, "step": _step, "update": _update}


def install() -> Callable[[], None]:
    """Wrap ``GradScaler``'s four step methods; returns how to put torch's back
    (``live_hooks.STRATEGY_HOOKS`` calls both while strategies live)."""
    for name, wrapper in _WRAPPERS.items():
        setattr(_GradScaler, name, functools.wraps(_ORIGINAL[name])(wrapper))

    def remove() -> None:
        for name, original in _ORIGINAL.items():
            setattr(_GradScaler, name, original)

    return remove
