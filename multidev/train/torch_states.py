"""torch objects whose whole state is their ``state_dict``: LR schedulers, ``GradScaler``, ``torch.Generator``.

A resumed PyTorch loop needs them as much as the optimizer: a ``StepLR`` restarted at epoch 0 (or a
``GradScaler`` back at its initial scale) gives another run, silently. ``md.train.Checkpoint`` stores
such a ``state_dict`` as JSON in the index (numbers, strings, lists, dicts, ``inf``), its tensors (a
generator's state, tensor learning rates) in the safetensors file, and never pickles. A value that is
neither (a function left in a scheduler's dict) raises ``ValueError`` at save naming it, instead of
being dropped.

Example:
    ckpt = md.train.Checkpoint(model=model, optimizer=opt, scheduler=scheduler, scaler=scaler,
                               rng=torch.default_generator)      # dropout resumes where it was
"""

from __future__ import annotations

import logging
import numbers
import weakref

import torch

_log = logging.getLogger("multidev.train")
_warned: "weakref.WeakSet" = weakref.WeakSet()

KIND = "torch_state"
_TENSOR = "__tensor__"      # {"__tensor__": storage key} stands for a tensor in the JSON state


def accepts(obj) -> bool:
    """Whether ``obj`` is checkpointed through its ``state_dict`` (torch's LR schedulers, ``GradScaler``,
    ``torch.Generator``)."""
    return isinstance(obj, (torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.ReduceLROnPlateau,
                            torch.amp.GradScaler, torch.Generator))


def state_dict(obj) -> dict:
    """``obj.state_dict()``; a ``torch.Generator``'s state (``torch.default_generator``: dropout's stream)."""
    if isinstance(obj, torch.Generator):
        return {"rng_state": obj.get_state()}
    return obj.state_dict()


def load_state_dict(obj, state: dict) -> None:
    if isinstance(obj, torch.Generator):
        obj.set_state(state["rng_state"])
    else:
        obj.load_state_dict(state)


def encode(obj, path: str, tensors: dict, storage_key) -> dict:
    """``obj.state_dict()`` as JSON; its tensors go to ``tensors`` under ``storage_key(path, name)``."""
    before = set(tensors)
    state = _to_json(state_dict(obj), "state", path, tensors, storage_key, type(obj).__name__)
    local = {key.split(":", 1)[1]: key for key in tensors if key not in before}
    return {"kind": KIND, "class": type(obj).__name__, "state": state, "tensors": local}


def _to_json(value, where: str, path: str, tensors: dict, storage_key, owner: str):
    if isinstance(value, torch.Tensor):
        key = storage_key(path, where)
        tensors[key] = value.detach().clone()
        return {_TENSOR: key}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(f"Cannot checkpoint the {owner} at {path!r}: its state_dict has non-string keys at "
                             f"{where!r} ({list(value)!r}); a checkpoint's index is JSON.")
        return {k: _to_json(v, f"{where}/{k}", path, tensors, storage_key, owner) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v, f"{where}/{i}", path, tensors, storage_key, owner) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):     # numpy scalars too (a plateau metric read with .numpy())
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise ValueError(f"Cannot checkpoint the {owner} at {path!r}: its state_dict holds {value!r} of type "
                     f"{type(value).__name__} at {where!r}, which is neither a tensor nor JSON (md.train never "
                     "pickles). Keep such values out of the object's __dict__ (torch itself leaves LambdaLR's "
                     "functions out of its state_dict), or hold them as numbers, strings or tensors.")


def decode(saved: dict, tensors: dict):
    """The ``state_dict`` that ``encode`` stored, with its tensors; and the storage keys it used."""
    used: list[str] = []

    def back(value):
        if isinstance(value, dict) and set(value) == {_TENSOR}:
            used.append(value[_TENSOR])
            return tensors[value[_TENSOR]].clone()
        if isinstance(value, dict):
            return {k: back(v) for k, v in value.items()}
        if isinstance(value, list):
            return [back(v) for v in value]
        return value

    return back(saved["state"]), used


def warn_untracked_schedulers(optimizers: list, tracked: list) -> None:
    """Log once per optimizer that a torch LR scheduler drives it (torch marks the optimizer's ``step``)
    while the checkpoint tracks none for it: the resumed run would restart the schedule, silently."""
    driven = {id(s.optimizer) for s in tracked if isinstance(s, torch.optim.lr_scheduler.LRScheduler)}
    for path, opt in optimizers:
        if getattr(opt.step, "_wrapped_by_lr_sched", False) and id(opt) not in driven and opt not in _warned:
            _warned.add(opt)
            _log.warning("The torch optimizer %r of this checkpoint is driven by an LR scheduler that the checkpoint "
                         "does not track: a run resumed from it restarts the schedule. Track it too: "
                         "md.train.Checkpoint(..., scheduler=scheduler).", path)
