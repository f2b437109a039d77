"""``md.keras.random``: Keras 3's random ops on torch generators.

``seed`` as in Keras 3: None draws from torch's global generator (seeded by
``md.keras.utils.set_random_seed``); an int gives the same values at every call; a ``SeedGenerator``
advances its own generator at each call. Shapes, dtypes and defaults are Keras 3's (float32, int32).
Under a strategy, replicas drawing with ``seed=None`` share the global generator (their order is
the threads' order): seed per replica where runs must repeat.

Example:
    noise = md.keras.random.normal((batch, latent_dim), seed=seed_generator)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import torch

from multidev._core.eager_tensor import eager
from multidev.keras import backend, batch_draw
from multidev.keras.layer_calls import outside_layers
from multidev.keras._missing import missing_names
from multidev.keras.ops.core import convert_to_tensor, standardize_dtype


class SeedGenerator:
    """A generator state that advances at every use (Keras 3's ``keras.random.SeedGenerator``)."""

    def __init__(self, seed=None, name=None, **kwargs):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"Argument `seed` must be an integer or None. Received: seed={seed!r}")
        self.name = name or "seed_generator"
        self.generator = torch.Generator()
        self.generator.manual_seed(int(torch.randint(0, 2**62, (1,))) if seed is None else seed)

    def next(self):
        """A fresh int seed drawn from this generator."""
        return int(torch.randint(0, 2**62, (1,), generator=self.generator))


#: Set while a pass must leave every stream as it found it (``unconsumed``).
_UNCONSUMED: contextvars.ContextVar[bool] = contextvars.ContextVar("md_keras_random_unconsumed", default=False)


@contextlib.contextmanager
def unconsumed():
    """``md.keras.random`` draws inside leave their streams where they were (a ``SeedGenerator`` or torch's global
    generator lends a copy of its state). For a pass one device never makes: the forward pass that builds a
    lazily-built model before its first distributed step (a VAE's ``Sampling`` would otherwise shift its noise);
    the weights it initializes still draw from torch's generator, as one device's first step does."""
    token = _UNCONSUMED.set(True)
    try:
        yield
    finally:
        _UNCONSUMED.reset(token)


def _generator(seed):
    """The torch generator for a Keras ``seed`` (None: the global one)."""
    if seed is None:
        return torch.Generator().set_state(torch.get_rng_state()) if _UNCONSUMED.get() else None
    if isinstance(seed, SeedGenerator):
        if _UNCONSUMED.get():
            return torch.Generator().set_state(seed.generator.get_state())
        return seed.generator
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"Argument `seed` must be an int, a keras.random.SeedGenerator or None. Received: seed={seed!r}")
    return torch.Generator().manual_seed(seed)


def _float_dtype(dtype):
    dtype = standardize_dtype(backend.floatx() if dtype is None else dtype)
    if not dtype.is_floating_point:
        raise ValueError(f"`dtype` must be a float dtype for this distribution. Received: dtype={dtype!r}")
    return dtype


def _shape(shape):
    return tuple(int(s) for s in shape) if isinstance(shape, (list, tuple)) else (int(shape),)


def _over_batch(draw, shape):
    """``draw(shape)``; inside a Keras step on replicas, this replica's rows of the global batch's draw
    (``batch_draw``: one device's numbers, never the same rows on two replicas)."""
    shape = _shape(shape)
    if not shape:
        return draw(shape)
    return batch_draw.rows(lambda n: draw((n, *shape[1:])), shape[0])


def _readable(draw):
    """``draw`` whose result, in a program's own code (outside every layer's call), is an ``EagerTensor`` as
    ``md.keras.ops`` results are: keras.io's PixelCNN samples with ``ops.ceil(probs - keras.random.uniform(
    probs.shape))``, ``probs`` a numpy array (torch's operator refuses an ndarray on the left; TensorFlow converts
    it). Inside a layer the draw stays a plain tensor."""
    @functools.wraps(draw)
    def public(*args, **kwargs):
        out = draw(*args, **kwargs)
        return eager(out) if outside_layers() else out
    return public


@_readable
def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Samples of N(mean, stddev**2)."""
    generator, dtype = _generator(seed), _float_dtype(dtype)
    out = _over_batch(lambda s: torch.randn(s, generator=generator, dtype=dtype), shape)
    return out * stddev + mean


@_readable
def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Samples of U[minval, maxval)."""
    generator, dtype = _generator(seed), _float_dtype(dtype)
    out = _over_batch(lambda s: torch.rand(s, generator=generator, dtype=dtype), shape)
    return out * (maxval - minval) + minval


@_readable
def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Integers in [minval, maxval)."""
    generator, dtype = _generator(seed), standardize_dtype(dtype)
    return _over_batch(lambda s: torch.randint(int(minval), int(maxval), s, generator=generator, dtype=dtype), shape)


@_readable
def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """N(mean, stddev**2) samples redrawn until within two standard deviations of the mean."""
    generator, dtype = _generator(seed), _float_dtype(dtype)

    def draw(s):
        out = torch.randn(s, generator=generator, dtype=dtype)
        outside = out.abs() > 2
        while outside.any():
            out[outside] = torch.randn(int(outside.sum()), generator=generator, dtype=dtype)
            outside = out.abs() > 2
        return out

    return _over_batch(draw, shape) * stddev + mean


@_readable
def dropout(inputs, rate, noise_shape=None, seed=None):
    """``inputs`` with a ``rate`` fraction zeroed and the rest scaled by 1 / (1 - rate)."""
    inputs = convert_to_tensor(inputs)
    shape = inputs.shape if noise_shape is None else tuple(d if d is not None else s
                                                           for d, s in zip(noise_shape, inputs.shape))
    keep = torch.rand(shape, generator=_generator(seed)) >= rate
    return inputs * keep.to(inputs.device) / (1.0 - rate)


@_readable
def shuffle(x, axis=0, seed=None):
    """``x`` permuted along ``axis``."""
    x = convert_to_tensor(x)
    order = torch.randperm(x.shape[axis], generator=_generator(seed)).to(x.device)
    return x.index_select(axis, order)


@_readable
def categorical(logits, num_samples, dtype="int32", seed=None):
    """``num_samples`` class ids per row of ``logits`` (drawn with replacement)."""
    probs = torch.softmax(convert_to_tensor(logits).float(), dim=-1)
    samples = torch.multinomial(probs, num_samples, replacement=True, generator=_generator(seed))
    return samples.to(standardize_dtype(dtype))


def _with_seed(seed, draw):
    """``draw()`` with torch's global generator seeded from ``seed`` (torch.distributions take no generator)."""
    generator = _generator(seed)
    if generator is None:
        return draw()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        return draw()


@_readable
def gamma(shape, alpha, dtype=None, seed=None):
    """Samples of Gamma(alpha, 1)."""
    dtype = _float_dtype(dtype)
    return _with_seed(seed, lambda: torch.distributions.Gamma(torch.tensor(float(alpha)), 1.0)
                      .sample(_shape(shape)).to(dtype))


@_readable
def beta(shape, alpha, beta, dtype=None, seed=None):
    """Samples of Beta(alpha, beta)."""
    dtype = _float_dtype(dtype)
    return _with_seed(seed, lambda: torch.distributions.Beta(torch.as_tensor(alpha, dtype=torch.float32),
                                                             torch.as_tensor(beta, dtype=torch.float32))
                      .sample(_shape(shape)).to(dtype))


@_readable
def binomial(shape, counts, probabilities, dtype=None, seed=None):
    """Samples of Binomial(counts, probabilities) (as floats, as Keras 3)."""
    dtype = _float_dtype(dtype)
    return _with_seed(seed, lambda: torch.distributions.Binomial(
        torch.as_tensor(counts, dtype=torch.float32), torch.as_tensor(probabilities, dtype=torch.float32))
        .sample(_shape(shape)).to(dtype))


__all__ = ["SeedGenerator", "normal", "uniform", "randint", "truncated_normal", "dropout", "shuffle", "categorical",
           "gamma", "beta", "binomial"]
__getattr__ = missing_names(__name__, "random", globals())
