"""Keras activation functions by name, on torch.nn.functional.

Example:
    f = md.keras.activations.get("relu")
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev._core.user_warnings import warn_user
from multidev.keras._missing import missing_names


def linear(x):
    """Identity."""
    return x


def keep_logits(output, logits):
    """Attach ``logits`` to an activation's ``output``, as Keras's softmax and sigmoid do, so that
    cross-entropy computes from them: a saturated prediction keeps its gradient (clipped probabilities
    have none). Only this tensor carries them; any op on it gives a new tensor without."""
    output._keras_logits = logits
    return output


def take_logits(output, from_logits, activation, fn_name):
    """``(output, from_logits)`` for a cross-entropy: the logits ``output`` keeps, if any, with
    ``from_logits=True``; else unchanged. As Keras's ``_get_logits``, whichever activation kept them
    (``activation`` only names it in the warning that ``from_logits=True`` then gets)."""
    logits = getattr(output, "_keras_logits", None)
    if logits is None:
        return output, from_logits
    if from_logits:
        warn_user(f"`{fn_name}` received `from_logits=True`, but the `output` argument was produced by a "
                  f"{activation} activation and thus does not represent logits. Was this intended?")
    return logits, True


def softmax(x, axis=-1):
    """Softmax over ``axis`` (last by default); the output keeps its logits, as Keras's does."""
    return keep_logits(torch.softmax(x, dim=axis), x)


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras's relu: ``x`` above ``threshold`` (capped at ``max_value``), ``negative_slope * (x - threshold)``
    below; computed in Keras's steps so that the gradients at the kinks (``x == threshold``) are TF's."""
    if max_value is None and threshold == 0:
        return F.relu(x) if negative_slope == 0 else F.leaky_relu(x, negative_slope)
    negative = F.relu(threshold - x) if negative_slope != 0 else None
    if threshold != 0:
        out = x * (x > threshold).to(x.dtype)
    elif max_value == 6:
        out, max_value = F.relu6(x), None
    else:
        out = F.relu(x)
    if max_value is not None:
        out = torch.clamp(out, 0.0, max_value)
    return out if negative is None else out - negative_slope * negative


def leaky_relu(x, negative_slope=0.2):
    """``x`` if positive, ``negative_slope * x`` otherwise (Keras 3's default slope 0.2, not torch's 0.01)."""
    return F.leaky_relu(x, negative_slope)


def elu(x, alpha=1.0):
    """``x`` if positive, ``alpha * (exp(x) - 1)`` otherwise."""
    return F.elu(x, alpha)


def selu(x):
    """Scaled ELU; its gradient at 0 is TF's ``scale`` (the positive branch; torch's takes the negative one)."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return torch.where(x < 0, (scale * alpha) * torch.expm1(x), scale * x)


def gelu(x, approximate=False):
    """Gaussian error linear unit, exact by default; ``approximate=True`` is the tanh form (Keras's flag)."""
    if not isinstance(approximate, bool):
        raise TypeError(f"`approximate` must be a bool (True: the tanh approximation). Received: "
                        f"approximate={approximate!r}")
    return F.gelu(x, approximate="tanh" if approximate else "none")


def hard_silu(x):
    """``x * relu6(x + 3) / 6`` (Keras's hard_silu / hard_swish)."""
    return F.hardswish(x)


def log_softmax(x, axis=-1):
    """Log of the softmax over ``axis``."""
    return torch.log_softmax(x, dim=axis)


def sigmoid(x):
    """1 / (1 + exp(-x)); the output keeps its logits, as Keras's does (see ``keep_logits``)."""
    return keep_logits(torch.sigmoid(x), x)


_BY_NAME = {
    "linear": linear, "relu": relu, "softmax": softmax, "sigmoid": sigmoid, "tanh": torch.tanh,
    "elu": elu, "selu": selu, "gelu": gelu, "softplus": F.softplus, "softsign": F.softsign,
    "swish": F.silu, "silu": F.silu, "relu6": F.relu6, "leaky_relu": leaky_relu,
    "exponential": torch.exp, "log_softmax": log_softmax, "hard_sigmoid": F.hardsigmoid, "mish": F.mish,
    "hard_silu": hard_silu, "hard_swish": hard_silu,
}

# Keras 3's names, as attributes too (``keras.activations.gelu``), not only through ``get``.
(tanh, softplus, softsign, swish, silu, relu6, exponential, hard_sigmoid, mish) = (
    _BY_NAME[n] for n in ("tanh", "softplus", "softsign", "swish", "silu", "relu6", "exponential", "hard_sigmoid",
                          "mish"))
hard_swish = hard_silu


def get(identifier):
    """Resolve an activation name (or None -> linear, or a callable)."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    from multidev.keras.saving import serialization   # (saving imports the layers, which import this module)
    registered = serialization.get_custom_objects().get(identifier) if isinstance(identifier, str) else None
    if callable(registered):   # @register_keras_serializable() functions, saved by name
        return registered
    raise ValueError(f"Unknown activation function: {identifier!r}. Valid names: {sorted(_BY_NAME)}.")


def serialize(fn) -> str:
    """Name of an activation (for get_config)."""
    for name, f in _BY_NAME.items():
        if f is fn:
            return name
    from multidev.keras.saving import serialization
    return serialization.registered_name(fn) or getattr(fn, "__name__", repr(fn))

__getattr__ = missing_names(__name__, 'activations', globals())  # unknown names: does Keras 3 have them?
