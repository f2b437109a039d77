"""Keras 3's ``Dropout`` in ``fit`` on multidev's replicas: one device's mask over the global batch.

On one device a ``Dropout`` draws one mask for the whole batch (from its ``SeedGenerator`` when seeded, else
from torch's global generator). In ``fit``'s step (built-in or the model's own ``train_step``) every replica
knows where its slice lies in the global batch (``batch_slice``), so a ``Dropout`` called there on inputs
whose leading dimension is the slice draws the global batch's mask once, in cross-replica context
(``merge_call``: the seed state and torch's generator advance once, as on one device), and each replica keeps
its rows: the same masks, losses and weights as one device. Elsewhere (``strategy.run`` in a custom loop,
a ``noise_shape`` with a fixed batch entry, inputs that are not the slice) the layer runs as Keras's, with
``keras3``'s per-replica seed streams.

``SpatialDropout1D/2D/3D`` (their ``call`` draws one mask entry per example and channel) take the same path.

Private Keras names used: ``SeedGenerator._initial_seed``, the spatial layers' ``_get_noise_shape`` (checked
against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Iterator

import torch

from multidev._core import draw_layout
from multidev.values import context

#: (offset of this replica's slice in the global batch, its size, the global batch size), set in fit's steps
#: where every replica has examples (a replica without any runs no forward pass, so it could not join the draw).
_SLICE: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("multidev_keras3_batch_slice", default=None)


@contextlib.contextmanager
def batch_slice(sizes: list, replica: int) -> Iterator[None]:
    """Inside a replica's step: its slice of the global batch split into ``sizes`` (in replica order). With an
    empty slice (a last batch smaller than the replicas) the layer runs as Keras's: when one replica holds the
    whole batch (the first: slices are filled in order) that is one device's draw."""
    where = None if 0 in sizes else (sum(sizes[:replica]), sizes[replica], sum(sizes))
    token = _SLICE.set(where)
    try:
        yield
    finally:
        _SLICE.reset(token)


def call(original: Any, layer: Any, inputs: Any, training: Any = False) -> Any:
    """``Dropout.call``: inside fit's step on several replicas, this replica's rows of the global batch's mask."""
    where = _SLICE.get()
    ctx = context.current_replica_context()
    if (not training or layer.rate <= 0 or layer.rate >= 1 or where is None or ctx is None
            or ctx.num_replicas_in_sync == 1 or not isinstance(inputs, torch.Tensor) or inputs.ndim == 0
            or inputs.shape[0] != where[1]):
        return original(layer, inputs, training)
    noise_shape = _noise_shape(layer, inputs)
    if noise_shape is not None and noise_shape[0] is not None:
        return original(layer, inputs, training)
    offset, size, global_size = where
    noise = ctx.merge_call(_global_noise, args=(layer, inputs, global_size, noise_shape))
    rows = noise[offset:offset + size].to(inputs.device)
    if _seeded(layer, noise_shape):   # Keras's seeded form: where(mask, inputs / keep_prob, 0)
        return torch.where(rows != 0, inputs / (1.0 - layer.rate), torch.zeros_like(inputs))
    return inputs * rows   # torch's dropout: inputs * (bernoulli(keep_prob) / keep_prob)


def _noise_shape(layer: Any, inputs: Any) -> tuple | None:
    """The layer's ``noise_shape``; a spatial dropout's from its inputs, the batch entry left to the draw."""
    if not hasattr(layer, "_get_noise_shape"):
        return layer.noise_shape
    return (None, *tuple(layer._get_noise_shape(inputs))[1:])


def _seeded(layer: Any, noise_shape: Any) -> bool:
    """Keras's torch dropout takes its seeded path for a seeded generator or a ``noise_shape``."""
    return layer.seed_generator._initial_seed is not None or noise_shape is not None


def _global_noise(strategy: Any, layer: Any, inputs: Any, global_size: Any, noise_shape: Any) -> torch.Tensor:
    """The global batch's dropout of ones (``1 / keep_prob`` where kept, 0 elsewhere), drawn once as Keras draws it
    on one device (every replica passes the same layer; the first replica's inputs give the device and, for torch's
    unseeded dropout, which fills its mask in the inputs' memory order, the layout: a Conv1D output's is not
    logical)."""
    keras = sys.modules["keras"]
    first = strategy.experimental_local_results(inputs)[0]
    size = int(strategy.experimental_local_results(global_size)[0])
    with torch.no_grad():
        ones = (torch.ones((size, *first.shape[1:]), dtype=first.dtype, device=first.device)
                if _seeded(layer, noise_shape) else draw_layout.ones_like_rows(first, size))
        return keras.random.dropout(ones, layer.rate, noise_shape=noise_shape, seed=layer.seed_generator)
