"""An outer layer call runs where the layer's weights are, as TensorFlow runs an op where its variables are.

A model built in ``md.device("/GPU:0")`` or in a strategy's scope on GPUs, then called outside that scope
(``model(x_numpy)``, ``model(torch_cpu_batch)``) met "Expected all tensors to be on the same device": TensorFlow
copies an op's inputs to its device. The outermost call (not one inside another layer's call, whose inputs are
already there) outside any device scope (a replica's or the user's, whose placement rules apply instead) moves
the call's tensors to its first parameter's device and, off the CPU, runs in that device's scope, so tensors
the call makes (``torch.zeros(...)``, ``md.keras.ops.ones(...)``) land there too, as they do in a replica. A
layer whose weights are on several devices (placed by hand, the GPU guide's manual placement) is left alone.
"""

from __future__ import annotations

import contextlib

import torch

from multidev.devices import registry
from multidev.devices.stream_order import to_device
from multidev.keras.layers.keras_tensor import flatten
from multidev.placement.mode import elsewhere
from multidev.placement.scope import current_device, device_scope
from multidev.values.distributed import map_structure

_NO_SCOPE = contextlib.nullcontext()


def first_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The module's first parameter, else its first buffer (None for a module with neither)."""
    for p in module.parameters():
        return p
    for b in module.buffers():
        return b
    return None


def device_type(inputs) -> str:
    """The device type of a call's first input tensor ('cpu' when it has none): where autocast applies."""
    leaf = flatten(inputs)[0]
    return leaf.device.type if isinstance(leaf, torch.Tensor) else "cpu"


def on_device(data, device: torch.device):
    """``data`` (nested lists, tuples, named tuples, dicts) with every tensor on ``device`` (non-blocking off
    the CPU)."""
    return map_structure(lambda t: to_device(t, device) if isinstance(t, torch.Tensor) and t.device != device else t,
                         data)


def place_call(layer, inputs, args: tuple, kwargs: dict):
    """``(inputs, args, kwargs, scope)`` for an outermost call of ``layer``: its tensors on the weights' device and
    the scope to run it in. Left as they are inside a device scope, for a weightless layer, and for weights on
    several devices (a program that placed its layers by hand: its ops follow their weights)."""
    if current_device() is not None:
        return inputs, args, kwargs, _NO_SCOPE
    weight = next(layer.parameters(), None)   # not buffers: reading an on-read one may raise (NONE aggregation)
    if weight is None:
        return inputs, args, kwargs, _NO_SCOPE
    device = weight.device
    on_cpu = device.type == "cpu"
    if on_cpu and not elsewhere((inputs, args[1:], kwargs), device):
        return inputs, args, kwargs, _NO_SCOPE      # the common case: nothing to move, no scope
    if any(p.device != device for p in layer.parameters()):
        return inputs, args, kwargs, _NO_SCOPE
    inputs, rest, kwargs = on_device((inputs, tuple(args[1:]), kwargs), device)
    args = (args[0],) + rest if args else args
    if on_cpu:
        return inputs, args, kwargs, _NO_SCOPE
    return inputs, args, kwargs, device_scope(registry.device_for_tensor(weight))
