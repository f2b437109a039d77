"""Keras 3's seeded random draws over the batch in ``fit``'s step: one device's numbers, each replica its rows.

On one device a draw whose leading dimension is the batch (``keras.random.normal((batch, latent_dim),
seed=self.seed_generator)`` in a VAE's ``Sampling`` layer or a GAN's ``train_step``; the flips, angles, zooms,
contrasts and translations Keras's image augmentation layers draw per image: ``RandomFlip``, ``RandomRotation``,
``RandomZoom``, ``RandomContrast``, ``RandomTranslation``, ...) gives every example its own numbers. On
replicas each would draw only its slice's rows: with a ``SeedGenerator`` from the per-replica streams
(``replica_seed``: independent, not one device's), with an int seed the *same* rows on every replica
(every replica's half flipped or noised alike). Here, in ``fit``'s step (built-in or the model's own
``train_step``: ``keras3_dropout.batch_slice`` says where the replica's slice lies), a draw through the torch
backend's ``normal``/``uniform``/``randint`` (``truncated_normal`` draws through ``normal``) whose leading
dimension is the replica's slice size and whose seed is a ``SeedGenerator`` or an int is drawn once for the
global batch, in cross-replica context (``merge_call``: the seed state advances once, as on one device), and
every replica keeps its rows: one device's numbers.

A scalar draw there (shape ``()``: ``RandomCrop``'s offset, one window for the whole batch) is drawn once in
cross-replica context too and every replica takes it, as one device draws it once for the batch (each replica
cropped its own window before). Left as Keras draws them (per-replica streams): unseeded draws (``seed=None``:
Keras's per-thread global generator), draws whose leading dimension is not the slice (a GAN's ``(2 * batch, 1)``
label noise), ``binomial``/``gamma``/``beta``, and anything in a custom loop's ``strategy.run``.
A leading dimension that merely equals the slice size also takes the global draw: its rows differ per replica
as the streams' would. Every replica must make the same draws (same Python path), as with ``Dropout``.

Private Keras names used: ``keras.src.backend.torch.random`` (its module functions are replaced; checked
against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from multidev.integrations import keras3_dropout
from multidev.values import context

DRAWS = ("normal", "uniform", "randint")   # truncated_normal draws through normal


def install(random_module: Any, seed_generator_cls: type) -> None:
    """Replace ``random_module``'s draws (the torch backend's ``random``, looked up at every call by
    ``keras.random`` and by preprocessing layers' ``self.backend.random``)."""
    for name in DRAWS:
        original = getattr(random_module, name)
        if getattr(original, "_multidev_original", None) is None:
            seed_at = list(inspect.signature(original).parameters).index("seed") - 1   # in *args after shape
            wrapper = functools.wraps(original)(functools.partial(draw, original, seed_generator_cls, seed_at))
            wrapper._multidev_original = original
            setattr(random_module, name, wrapper)


def draw(original: Any, seed_generator_cls: type, seed_at: int, shape: Any, *args: Any, **kwargs: Any) -> Any:
    """A draw of ``shape``: inside fit's step with the slice as leading dimension, this replica's rows of the
    global batch's draw; elsewhere Keras's own."""
    where = keras3_dropout._SLICE.get()
    seed = kwargs.get("seed", args[seed_at] if len(args) > seed_at else None)
    if where is None or not _is_seed(seed, seed_generator_cls):
        return original(shape, *args, **kwargs)
    scalar = _scalar(shape)
    if not scalar and not _batch_shaped(shape, where[1]):
        return original(shape, *args, **kwargs)
    ctx = context.current_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return original(shape, *args, **kwargs)
    if scalar:   # one number for the whole batch (RandomCrop's offset): one device's, on every replica
        value = ctx.merge_call(_draw_once, args=(original, (), args, kwargs))
        device = _device()
        return value if device is None else value.to(device)
    offset, size, global_size = where
    full = ctx.merge_call(_draw_once, args=(original, (global_size, *tuple(shape)[1:]), args, kwargs))
    rows = full[offset:offset + size]
    device = _device()
    return rows if device is None else rows.to(device)


def _is_seed(seed: Any, seed_generator_cls: type) -> bool:
    return isinstance(seed, seed_generator_cls) or (isinstance(seed, int) and not isinstance(seed, bool))


def _scalar(shape: Any) -> bool:
    try:
        return len(shape) == 0
    except TypeError:
        return False


def _batch_shaped(shape: Any, size: int) -> bool:
    try:
        return len(shape) > 0 and int(shape[0]) == size
    except (TypeError, ValueError):   # a symbolic or unknown leading dimension
        return False


def _device() -> Any:
    from keras.src.backend.torch.core import get_device   # noqa: PLC0415 - keras is imported by then
    device = get_device()
    return None if device == "meta" else device


def _draw_once(strategy: Any, original: Any, shape: Any, args: Any, kwargs: Any) -> torch.Tensor:
    """The global batch's draw, once (every replica passes the same seed and arguments)."""
    first = strategy.experimental_local_results
    shape = tuple(int(first(d)[0]) for d in shape)   # equal ints may reach here per replica
    args = tuple(first(a)[0] for a in args)
    kwargs = {k: first(v)[0] for k, v in kwargs.items()}
    with torch.no_grad():
        return original(shape, *args, **kwargs)


_STREAM_STRIDE = 0x9E3779B1  # replica r's seeds are offset by r * this (mod 2**32): streams far apart


def replica_seed(original: Any, generator: Any, ordered: bool = True) -> Any:
    """``SeedGenerator.next`` inside ``strategy.run``: replica r > 0 gets the seed offset by ``r`` strides, so
    replicas draw different numbers (dropout masks, noise) from their copies of one seed state, as one
    device draws different numbers for every example; the state itself advances alike on every replica."""
    seed = original(generator, ordered=ordered)
    ctx = context.current_replica_context()
    if ctx is None or ctx._global_replica_id == 0:
        return seed
    offset = (int(seed[0]) + ctx._global_replica_id * _STREAM_STRIDE + 2**31) % 2**32 - 2**31
    shifted = seed.clone()
    shifted[0] = offset
    return shifted
