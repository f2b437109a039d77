"""Keras activation functions by name, on torch.nn.functional.

Example:
    f = md.keras.activations.get("relu")
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
import torch
import torch.nn.functional as F


def linear(x):
    """Identity."""
    return x


def softmax(x, axis=-1):
    """Softmax over ``axis`` (last by default)."""
    return torch.softmax(x, dim=axis)


def relu(x):
    """max(x, 0)."""
    return F.relu(x)


def sigmoid(x):
    """1 / (1 + exp(-x)); the output keeps its logits, as Keras's does, so that binary cross-entropy
    computes from them: a saturated prediction still has a gradient (clipped probabilities have none)."""
    out = torch.sigmoid(x)
    out._keras_logits = x
    return out


_BY_NAME = {
    "linear": linear, "relu": relu, "softmax": softmax, "sigmoid": sigmoid, "tanh": torch.tanh,
    "elu": F.elu, "selu": F.selu, "gelu": F.gelu, "softplus": F.softplus, "softsign": F.softsign,
    "swish": F.silu, "silu": F.silu, "relu6": F.relu6, "leaky_relu": F.leaky_relu,
    "exponential": torch.exp, "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
    "hard_sigmoid": F.hardsigmoid, "mish": F.mish,
}

# Keras 3's names, as attributes too (``keras.activations.gelu``), not only through ``get``.
(sigmoid, tanh, elu, selu, gelu, softplus, softsign, swish, silu, relu6, leaky_relu, exponential, log_softmax,
 hard_sigmoid, mish) = (_BY_NAME[n] for n in ("sigmoid", "tanh", "elu", "selu", "gelu", "softplus", "softsign",
                                             "swish", "silu", "relu6", "leaky_relu", "exponential", "log_softmax",
                                             "hard_sigmoid", "mish"))


def get(identifier):
    """Resolve an activation name (or None -> linear, or a callable)."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"Unknown activation function: {identifier!r}. Valid names: {sorted(_BY_NAME)}.")


def serialize(fn) -> str:
    """Name of an activation (for get_config)."""
    for name, f in _BY_NAME.items():
        if f is fn:
            return name
    return getattr(fn, "__name__", repr(fn))

__getattr__ = missing_names(__name__, 'activations', globals())  # unknown names: does Keras 3 have them?
