"""Keras weight initializers by name (glorot_uniform, zeros, random_uniform, ...), on torch.nn.init.

Example:
    init = md.keras.initializers.get("glorot_uniform")
    w = init((784, 10))
"""

from __future__ import annotations

from multidev._core.errors import InvalidArgumentError
from multidev.keras import backend
from multidev.keras._missing import missing_names
import math

import numpy as np
import torch
from torch.nn import init as tinit


class Initializer:
    """Base class: ``init(shape, dtype)`` returns a new tensor."""

    def __call__(self, shape, dtype=None):
        # a name or numpy dtype, as TF and Keras 3 take it (keras.io's VQ-VAE: w_init(shape=..., dtype="float32"))
        t = torch.empty(tuple(shape), dtype=backend.as_dtype(dtype))
        with torch.no_grad():
            self._fill(t)
        return t

    def _fill(self, t):
        raise NotImplementedError

    def get_config(self):
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Zeros(Initializer):
    """All zeros (Keras default for biases)."""

    def _fill(self, t):
        t.zero_()


class Ones(Initializer):
    """All ones (BatchNormalization gamma)."""

    def _fill(self, t):
        t.fill_(1.0)


class Constant(Initializer):
    """A constant value: a number or an array (list, numpy array, tensor) broadcast to the shape.

    As Keras's ``value * ones(shape)``: ``Constant(np.array([1., 2., 3.]))((2, 3))`` repeats the row;
    shapes that do not broadcast raise ``InvalidArgumentError`` (a ValueError), as TensorFlow does.
    """

    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype=None):
        dtype = backend.as_dtype(dtype)
        value = self.value.detach() if isinstance(self.value, torch.Tensor) else np.asarray(self.value)
        value = torch.as_tensor(value).to(dtype)
        try:
            return value * torch.ones(tuple(shape), dtype=dtype)
        except RuntimeError:
            raise InvalidArgumentError(
                f"Constant initializer: value of shape {tuple(value.shape)!r} does not broadcast to the "
                f"weight's shape {tuple(shape)!r}; pass a scalar or an array of the weight's shape."
            ) from None

    def get_config(self):
        value = self.value
        if not isinstance(value, (int, float)):  # numpy scalars and arrays, lists, tensors: JSON numbers
            value = np.asarray(value).tolist()
        return {"value": value}


class RandomUniform(Initializer):
    """Uniform in [minval, maxval) (Keras default -0.05..0.05, used by Embedding)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def _fill(self, t):
        tinit.uniform_(t, self.minval, self.maxval, generator=_gen(self.seed))


class RandomNormal(Initializer):
    """Normal with mean and stddev (Keras default 0, 0.05)."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def _fill(self, t):
        tinit.normal_(t, self.mean, self.stddev, generator=_gen(self.seed))


def _fans(shape):
    """Keras fan_in / fan_out: kernels are (..., in, out) with receptive field first."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(Initializer):
    """Keras VarianceScaling: scale / fan, uniform or (truncated) normal."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode!r}. Valid values: ['fan_in', 'fan_out', 'fan_avg'].")
        distribution = str(distribution).lower()
        distribution = "truncated_normal" if distribution == "normal" else distribution   # Keras's alias
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"Invalid `distribution` argument: {distribution!r}. Valid values: "
                             "['truncated_normal', 'untruncated_normal', 'uniform'].")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def _fill(self, t):
        fan_in, fan_out = _fans(tuple(t.shape))
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        var = self.scale / max(1.0, fan)
        if self.distribution == "uniform":
            lim = math.sqrt(3.0 * var)
            tinit.uniform_(t, -lim, lim, generator=_gen(self.seed))
        else:
            std = math.sqrt(var) / (0.87962566103423978 if self.distribution == "truncated_normal" else 1.0)
            if self.distribution == "truncated_normal":
                tinit.trunc_normal_(t, 0.0, std, -2 * std, 2 * std, generator=_gen(self.seed))
            else:
                tinit.normal_(t, 0.0, std, generator=_gen(self.seed))


class GlorotUniform(VarianceScaling):
    """Glorot/Xavier uniform (Keras default for kernels)."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "uniform", seed)

    def get_config(self):
        return {"seed": self.seed}


class GlorotNormal(VarianceScaling):
    """Glorot/Xavier truncated normal."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed)

    def get_config(self):
        return {"seed": self.seed}


class HeNormal(VarianceScaling):
    """He truncated normal (scale 2, fan_in)."""

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed)

    def get_config(self):
        return {"seed": self.seed}


class HeUniform(VarianceScaling):
    """He uniform (scale 2, fan_in)."""

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "uniform", seed)

    def get_config(self):
        return {"seed": self.seed}


class TruncatedNormal(Initializer):
    """Normal with ``mean`` and ``stddev``, redrawn outside two ``stddev`` (Keras default 0, 0.05): the
    values' own spread is about 0.88 ``stddev``, as TF's."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def _fill(self, t):
        tinit.trunc_normal_(t, self.mean, self.stddev, self.mean - 2 * self.stddev, self.mean + 2 * self.stddev,
                            generator=_gen(self.seed))


class LecunNormal(VarianceScaling):
    """LeCun truncated normal (scale 1, fan_in)."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "truncated_normal", seed)

    def get_config(self):
        return {"seed": self.seed}


class LecunUniform(VarianceScaling):
    """LeCun uniform (scale 1, fan_in)."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_in", "uniform", seed)

    def get_config(self):
        return {"seed": self.seed}


class Orthogonal(Initializer):
    """Orthogonal matrix (Keras default for recurrent kernels)."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = gain, seed

    def _fill(self, t):
        if t.dtype in (torch.float16, torch.bfloat16):   # torch's QR has no half kernel: draw in float32
            t.copy_(tinit.orthogonal_(torch.empty(t.shape), self.gain, generator=_gen(self.seed)))
            return
        tinit.orthogonal_(t, self.gain, generator=_gen(self.seed))


def _gen(seed):
    return None if seed is None else torch.Generator().manual_seed(int(seed))


_BY_NAME = {
    "zeros": Zeros, "ones": Ones, "constant": Constant, "random_uniform": RandomUniform,
    "uniform": RandomUniform, "random_normal": RandomNormal, "normal": RandomNormal,
    "variance_scaling": VarianceScaling, "glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal,
    "he_normal": HeNormal, "he_uniform": HeUniform, "orthogonal": Orthogonal, "truncated_normal": TruncatedNormal,
    "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform,
}
_CLASSES = {cls.__name__: cls for cls in _BY_NAME.values()}
# tf.keras's lower-case aliases of the classes (the time_series tutorial's `tf.initializers.zeros()`)
zeros, ones, constant, random_uniform, random_normal, variance_scaling, glorot_uniform, glorot_normal, \
    he_normal, he_uniform, orthogonal, truncated_normal, lecun_normal, lecun_uniform = (
        Zeros, Ones, Constant, RandomUniform, RandomNormal, VarianceScaling, GlorotUniform, GlorotNormal,
        HeNormal, HeUniform, Orthogonal, TruncatedNormal, LecunNormal, LecunUniform)


def get(identifier) -> Initializer:
    """Resolve an initializer name, config dict, instance or callable; ``None`` stays ``None`` (Keras's: the
    weight then gets ``add_weight``'s default, glorot_uniform: the imbalanced_data tutorial's
    ``Dense(1, bias_initializer=output_bias)`` with ``output_bias=None``)."""
    if identifier is None:
        return None
    if isinstance(identifier, Initializer) or (callable(identifier) and not isinstance(identifier, (str, dict, type))):
        return identifier
    if isinstance(identifier, dict):
        return _CLASSES[identifier["class_name"]].from_config(identifier.get("config", {}))
    if isinstance(identifier, str):
        if identifier in _BY_NAME:
            return _BY_NAME[identifier]()
        if identifier in _CLASSES:
            return _CLASSES[identifier]()
    raise ValueError(
        f"Unknown initializer: {identifier!r}. Valid names: {sorted(_BY_NAME)}. "
        "Pass an Initializer instance for anything else."
    )


def serialize(init) -> dict | str:
    """Config form of an initializer (for layer get_config)."""
    if isinstance(init, Initializer) and type(init).__name__ in _CLASSES:
        return {"class_name": type(init).__name__, "config": init.get_config()}
    return init

__getattr__ = missing_names(__name__, 'initializers', globals())  # unknown names: does Keras 3 have them?
