"""Where a metric's state lives on GPU replicas: on their devices, never read back each step.

A Keras step on replicas gives each replica a fresh state (``Metric._fresh_state``) and merges them into the
metric's own state after the step (``merge_state``). Fresh states cloned from the host-side initial values and
merged into a host-side own state made two host-device copies per state per step, each waiting for the
device; TensorFlow keeps metric variables on the replicas' devices. Here a replica's fresh state is a clone of
the initial values copied once to its device, and the metric's own state moves, once, to the GPU the first
merged state comes from (in place, so a tensor a subclass kept from ``add_variable`` stays its state).
"""

from __future__ import annotations

import torch

from multidev._core.moved_in_place import move_in_place
from multidev.placement.scope import current_device


def scope_device() -> torch.device | None:
    """The torch device of this thread's device scope (a replica's), or None outside any."""
    device = current_device()
    return None if device is None else device.torch_device


def initial_on(metric, device: torch.device) -> dict:
    """``metric._initial`` on ``device``: copied once per device and initial tensor, then cloned from there."""
    cache = metric.__dict__.setdefault("_initial_by_device", {})
    out = {}
    for name, value in metric._initial.items():
        hit = cache.get((device, name))
        if hit is None or hit[0] is not value:     # a state re-sized at its first update has a new initial tensor
            hit = cache[(device, name)] = (value, value.to(device))
        out[name] = hit[1].clone()
    return out


def follow_replicas(mine: list, theirs: list) -> None:
    """Move the metric's own host state (``mine``, plain tensors) to the device (a GPU) that ``theirs`` (the
    replicas' states being merged in) are on; left as it is when either is elsewhere."""
    if not theirs or not mine or theirs[0].device.type == "cpu":
        return
    if all(type(t) is torch.Tensor and t.device.type == "cpu" for t in mine):
        for t in mine:
            move_in_place(t, theirs[0].device)
