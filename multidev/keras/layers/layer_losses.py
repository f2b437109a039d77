"""Losses a layer adds (``add_loss``, activity and weight regularizers) and Keras masks on tensors.

Call losses belong to the thread that made the call: replicas run the same layer objects in their
own threads, and each replica's ``model.losses`` must hold its own batch's losses, not another
replica's. The outermost layer call of a thread clears that thread's call losses of every sublayer,
as Keras does at the start of each top-level call. Weight penalties are evaluated whenever
``losses`` is read, on the weights the calling replica sees.

A Keras mask travels on the tensor itself (``tensor._keras_mask``), as in Keras: a layer whose
``call`` takes ``mask`` receives it, and ``compute_mask`` decides the output's mask.
"""

from __future__ import annotations

import threading

import torch

#: Whether any layer of this process ever recorded a call loss or has a weight penalty: until one has, the walks
#: over every sublayer at each top-level call and each ``model.losses`` read (each training step) find nothing.
_EVER = [False]


def note_weight_penalty() -> None:
    """A layer got a weight regularizer: ``losses`` must walk the layers from now on."""
    _EVER[0] = True


def clear_call_losses(layer) -> None:
    """Forget this thread's call losses of ``layer`` and all its sublayers (start of a top-level call)."""
    if not _EVER[0]:
        return
    me = threading.get_ident()
    for m in layer.modules():
        losses = getattr(m, "_call_losses", None)   # plain torch modules have none
        if losses:
            losses.pop(me, None)


def add_call_loss(layer, loss) -> None:
    """Record ``loss`` (a scalar tensor or number) for this thread's current call."""
    value = loss if isinstance(loss, torch.Tensor) else torch.as_tensor(float(loss))
    _EVER[0] = True
    layer._call_losses.setdefault(threading.get_ident(), []).append(value)


def refuse_add_metric(layer, *args, **kwargs):
    """``Layer.add_metric``: Keras 3 removed tf-keras 2's method; refused with Keras 3's NotImplementedError."""
    raise NotImplementedError(
        f"Layer `add_metric()` method is deprecated (layer {layer.name!r}). Add your metric in "
        "`Model.compile(metrics=[...])`, or create metric trackers in __init__() or build() when subclassing "
        "the layer or model, then call `metric.update_state()` whenever necessary.")


def record_activity(layer, outputs) -> None:
    """Keras 3's activity penalty: the regularizer of each output divided by its batch size."""
    flat = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    for out in flat:
        if isinstance(out, torch.Tensor):
            penalty = layer.activity_regularizer(out)
            if out.dim() > 0:
                penalty = penalty / out.shape[0] if out.shape[0] else penalty * 0.0
            add_call_loss(layer, penalty)


def collect(layer) -> list:
    """This thread's call losses of ``layer`` and its sublayers, then the penalties of trainable weights."""
    if not _EVER[0]:
        return []
    found, penalties = [], []
    _walk(layer, True, threading.get_ident(), found, penalties)
    return found + penalties


def _walk(module, parent_trainable: bool, me: int, found: list, penalties: list) -> None:
    """One pass over ``module`` and the modules under it. A frozen layer's weights have no penalty; weights
    are read by attribute, so inside a replica each penalty is of that replica's copy."""
    from multidev.keras.layers.base import Layer
    trainable = parent_trainable
    if isinstance(module, Layer):
        found.extend(module._call_losses.get(me, ()))
        trainable = parent_trainable and module._trainable
        if trainable:
            penalties.extend(regularizer(getattr(module, attr)) for attr, regularizer in module._weight_regularizers)
    for child in module._modules.values():
        if child is not None:
            _walk(child, trainable, me, found, penalties)


def mask_of(x):
    """The Keras mask a tensor carries (None when it has none)."""
    return getattr(x, "_keras_mask", None) if isinstance(x, torch.Tensor) else None


def attach_mask(outputs, mask) -> None:
    """Let ``outputs`` carry ``mask`` to the next layer (a list of masks: one per output, as Keras)."""
    if isinstance(outputs, torch.Tensor):
        outputs._keras_mask = mask
    elif isinstance(outputs, (list, tuple)) and isinstance(mask, (list, tuple)):
        for out, m in zip(outputs, mask):
            if isinstance(out, torch.Tensor) and m is not None:
                out._keras_mask = m
    elif isinstance(outputs, (list, tuple)) and outputs and isinstance(outputs[0], torch.Tensor):
        outputs[0]._keras_mask = mask
