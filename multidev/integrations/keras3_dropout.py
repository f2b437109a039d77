"""Keras 3's dropout in ``fit`` on multidev's replicas: one device's mask over the global batch.

On one device a ``Dropout`` draws one mask for the whole batch (from its ``SeedGenerator`` when seeded, else
from torch's global generator). In ``fit``'s step (built-in or the model's own ``train_step``) every replica
knows where its slice lies in the global batch (``batch_slice``), so a dropout drawn there on inputs whose
leading dimension is the slice draws the global batch's mask once, in cross-replica context (``merge_call``:
the seed state and torch's generator advance once, as on one device), and each replica keeps its rows: the
same masks, losses and weights as one device. The seam is the torch backend's ``random.dropout``, which
``Dropout``, ``SpatialDropout1D/2D/3D`` (a per-channel ``noise_shape`` whose batch entry is the slice) and
``Attention(dropout=...)`` call (``MultiHeadAttention`` through its ``Dropout``; an RNN cell's cached masks:
``keras3_rnn_dropout``). Elsewhere (``strategy.run`` in a custom loop, a ``noise_shape`` with another batch
entry, inputs that are not the slice) it draws as Keras's, with ``keras3``'s per-replica seed streams.

Private Keras names used: ``keras.src.backend.torch.random.dropout``, ``SeedGenerator._initial_seed`` (checked
against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
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


def dropout(original: Any, inputs: Any, rate: Any, noise_shape: Any = None, seed: Any = None) -> Any:
    """The backend's ``dropout``: inside fit's step on several replicas, this replica's rows of the global
    batch's mask."""
    where = _SLICE.get()
    ctx = context.current_replica_context()
    if (where is None or ctx is None or ctx.num_replicas_in_sync == 1 or not isinstance(inputs, torch.Tensor)
            or inputs.ndim == 0 or inputs.shape[0] != where[1] or not 0 < float(rate) < 1):
        return original(inputs, rate, noise_shape=noise_shape, seed=seed)
    if noise_shape is not None:
        noise_shape = tuple(noise_shape)
        if noise_shape[0] not in (None, where[1]):
            return original(inputs, rate, noise_shape=noise_shape, seed=seed)
        noise_shape = (None, *noise_shape[1:])   # the global batch's entry
    offset, size, global_size = where
    noise = ctx.merge_call(_global_noise, args=(original, inputs, rate, noise_shape, seed, global_size))
    rows = noise[offset:offset + size].to(inputs.device)
    if _seeded(seed, noise_shape):   # Keras's seeded form: where(mask, inputs / keep_prob, 0)
        return torch.where(rows != 0, inputs / (1.0 - rate), torch.zeros_like(inputs))
    return inputs * rows   # torch's dropout: inputs * (bernoulli(keep_prob) / keep_prob)


def _seeded(seed: Any, noise_shape: Any) -> bool:
    """Keras's torch dropout takes its seeded path for a seed (an int, or a generator made with one) or a
    ``noise_shape``."""
    return (seed is not None and getattr(seed, "_initial_seed", 0) is not None) or noise_shape is not None


def _global_noise(strategy: Any, original: Any, inputs: Any, rate: Any, noise_shape: Any, seed: Any,
                  global_size: Any) -> torch.Tensor:
    """The global batch's dropout of ones (``1 / keep_prob`` where kept, 0 elsewhere), drawn once as Keras draws it
    on one device (every replica passes the same arguments; the first replica's inputs give the device and, for
    torch's unseeded dropout, which fills its mask in the inputs' memory order, the layout: a Conv1D output's is
    not logical)."""
    first = lambda value: strategy.experimental_local_results(value)[0]   # noqa: E731
    inputs, rate, noise_shape, seed, size = (first(v) for v in (inputs, rate, noise_shape, seed, global_size))
    with torch.no_grad():
        ones = (torch.ones((int(size), *inputs.shape[1:]), dtype=inputs.dtype, device=inputs.device)
                if _seeded(seed, noise_shape) else draw_layout.ones_like_rows(inputs, int(size)))
        return original(ones, rate, noise_shape=noise_shape, seed=seed)


def install(random_module: Any) -> None:
    """Replace ``random_module.dropout`` (the torch backend's ``random``, looked up at every call)."""
    original = random_module.dropout
    if getattr(original, "_multidev_original", None) is None:
        wrapper = functools.wraps(original)(functools.partial(dropout, original))
        wrapper._multidev_original = original
        random_module.dropout = wrapper
