"""Keras 3's recurrent-layer dropout masks (``LSTM(dropout=...)``, ``recurrent_dropout``) on multidev's replicas.

A Keras 3 RNN cell caches its masks on the cell object (``DropoutRNNCell.get_dropout_mask``: drawn at the first
step of a call, reused at every step, reset by the RNN at its next call). Replicas run the same cell in their own
threads, so one replica could take, or reset, another's mask (keras.io's captcha OCR's Bidirectional LSTMs).
Here each replica keeps its own cache, and in ``fit``'s step, where a replica knows its slice of the global batch
(``keras3_dropout.batch_slice``), a mask over that slice is the replica's rows of one mask drawn for the global
batch in cross-replica context, as ``Dropout``'s: one device's masks. Elsewhere (``strategy.run`` in a custom
loop) each replica draws its own from its seed stream.

Private Keras names used: ``keras.src.layers.rnn.dropout_rnn_cell.DropoutRNNCell`` and its
``_create_dropout_mask`` (checked against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import torch

from multidev.integrations import keras3_dropout
from multidev.values import context

#: the cell's cached-mask getters and resetters, by the rate attribute they read
GETTERS = {"get_dropout_mask": "dropout", "get_recurrent_dropout_mask": "recurrent_dropout"}
RESETTERS = {"reset_dropout_mask": "dropout", "reset_recurrent_dropout_mask": "recurrent_dropout"}
_CACHE = "_multidev_replica_masks"   # {(rate attribute, replica id): mask}, in the cell's __dict__


def _replica() -> Any:
    ctx = context.current_replica_context()
    return ctx if ctx is not None and ctx.num_replicas_in_sync > 1 else None


def get_mask(rate_name: str, original: Any, cell: Any, step_input: Any) -> Any:
    """``get_dropout_mask``: on replicas, the calling replica's own cached mask (see the module docstring)."""
    ctx = _replica()
    if ctx is None:
        return original(cell, step_input)
    masks = cell.__dict__.setdefault(_CACHE, {})
    key, rate = (rate_name, int(ctx.replica_id_in_sync_group)), getattr(cell, rate_name)
    if masks.get(key) is None and rate > 0:
        masks[key] = _draw(ctx, cell, step_input, rate)
    return masks.get(key)


def reset(rate_name: str, original: Any, cell: Any) -> None:
    """``reset_dropout_mask``: forget the calling replica's mask only."""
    original(cell)
    ctx = _replica()
    if ctx is not None:
        cell.__dict__.get(_CACHE, {}).pop((rate_name, int(ctx.replica_id_in_sync_group)), None)


def _draw(ctx: Any, cell: Any, step_input: Any, rate: float) -> Any:
    where = keras3_dropout._SLICE.get()
    if where is None or not isinstance(step_input, torch.Tensor) or step_input.ndim == 0 \
            or step_input.shape[0] != where[1]:
        return cell._create_dropout_mask(step_input, rate)
    offset, size, global_size = where
    shape = (global_size, *step_input.shape[1:])
    full = ctx.merge_call(_global_mask, args=(cell, shape, step_input.dtype, str(step_input.device), rate))
    rows = lambda m: m[offset:offset + size].to(step_input.device)   # noqa: E731
    return [rows(m) for m in full] if isinstance(full, (list, tuple)) else rows(full)


def _global_mask(strategy: Any, cell: Any, shape: tuple, dtype: torch.dtype, device: Any, rate: float) -> Any:
    """The global batch's mask(s), drawn once as Keras draws them on one device (the first replica's device)."""
    with torch.no_grad():
        zeros = torch.zeros(shape, dtype=dtype, device=strategy.experimental_local_results(device)[0])
        return cell._create_dropout_mask(zeros, rate)


def dropout_rnn_cell() -> type:
    """Keras 3's private mixin of the RNN cells that cache dropout masks."""
    return importlib.import_module("keras.src.layers.rnn.dropout_rnn_cell").DropoutRNNCell


def install(wrap_method: Callable[[type, str, Any], None]) -> None:
    """Wrap the mixin's mask getters and resetters (``wrap_method(owner, name, wrapper)``: keras3's seam)."""
    for names, wrapper in ((GETTERS, get_mask), (RESETTERS, reset)):
        for name, rate in names.items():
            wrap_method(dropout_rnn_cell(), name, functools.partial(wrapper, rate))
