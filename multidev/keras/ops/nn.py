"""``md.keras.ops`` neural-network ops (``keras.ops.nn`` and ``keras.ops.math``) on torch.

Defaults are Keras 3's, which sometimes differ from torch's: ``gelu`` is the tanh approximation
unless ``approximate=False``, ``leaky_relu``'s slope is 0.2, ``one_hot`` gives float32.

Example:
    weights = ops.softmax(ops.matmul(q, ops.transpose(k, (0, 2, 1))) / ops.sqrt(d), axis=-1)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from multidev.keras import backend
from multidev.keras._missing import flat_namespace_names
from multidev.keras.activations import keep_logits, take_logits
from multidev.keras.ops.core import convert_to_tensor, standardize_dtype
from multidev.keras.ops.ctc import ctc_decode, ctc_loss  # noqa: F401 - keras.ops.nn has them too
from multidev.keras.ops.activations_more import *  # noqa: F401,F403 - keras.ops.nn has them too
from multidev.keras.ops.numpy import _dims, _float

_t = convert_to_tensor


def relu(x):
    """max(x, 0)."""
    return F.relu(_t(x))


def relu6(x):
    """min(max(x, 0), 6)."""
    return F.relu6(_t(x))


def sigmoid(x):
    """1 / (1 + exp(-x)); keeps its logits for the cross-entropies, as Keras 3's op does on TensorFlow."""
    x = _float(x)
    return keep_logits(torch.sigmoid(x), x)


def softmax(x, axis=-1):
    """Softmax over ``axis`` (a tuple normalises over several axes); over one axis it keeps its logits
    for the cross-entropies, as Keras 3's op does on TensorFlow (over a tuple it keeps none, as there)."""
    x = _float(x)
    if isinstance(axis, (list, tuple)):
        return torch.exp(x - torch.logsumexp(x, dim=tuple(axis), keepdim=True))
    return keep_logits(torch.softmax(x, dim=axis), x)


def log_softmax(x, axis=-1):
    """Log of the softmax over ``axis``."""
    return torch.log_softmax(_float(x), dim=axis)


def gelu(x, approximate=True):
    """Gaussian error linear unit; Keras's default is the tanh approximation."""
    return F.gelu(_float(x), approximate="tanh" if approximate else "none")


def silu(x):
    """x * sigmoid(x)."""
    return F.silu(_float(x))


swish = silu


def softplus(x):
    """log(1 + exp(x))."""
    return F.softplus(_float(x))


def softsign(x):
    """x / (1 + |x|)."""
    return F.softsign(_float(x))


def elu(x, alpha=1.0):
    """Exponential linear unit."""
    return F.elu(_float(x), alpha)


def selu(x):
    """Scaled exponential linear unit."""
    return F.selu(_float(x))


def leaky_relu(x, negative_slope=0.2):
    """x for x > 0, ``negative_slope`` * x otherwise (Keras's default slope 0.2)."""
    return F.leaky_relu(_float(x), negative_slope)


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return F.hardsigmoid(_float(x))


def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """Integer ids as one-hot vectors of ``num_classes`` (float32).

    Ids outside [0, num_classes) give zero vectors, as TensorFlow and Keras 3 on JAX do (Keras 3 on torch raises).
    """
    x = _t(x).long()
    valid = (x >= 0) & (x < num_classes)
    out = F.one_hot(torch.where(valid, x, torch.zeros_like(x)), num_classes) * valid.unsqueeze(-1)
    out = out.to(standardize_dtype(backend.floatx() if dtype is None else dtype))
    return out if axis == -1 else torch.movedim(out, -1, axis)


def multi_hot(inputs, num_classes, axis=-1, dtype=None, sparse=False):
    """The union of ``inputs``' one-hot vectors over their last axis."""
    return one_hot(inputs, num_classes, dtype=dtype).amax(dim=-2 if _t(inputs).ndim > 1 else 0)


def _probabilities(output, from_logits, axis):
    output = _float(output)
    if from_logits:
        return torch.log_softmax(output, dim=axis)
    output = output / output.sum(dim=axis, keepdim=True)
    return torch.log(output.clamp(backend.epsilon(), 1 - backend.epsilon()))


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """Per-example cross-entropy of one-hot ``target`` against ``output`` (probabilities or logits; the
    logits a softmax output keeps, as Keras)."""
    output, from_logits = take_logits(output, from_logits, "Softmax", "categorical_crossentropy")
    return -(_float(target) * _probabilities(output, from_logits, axis)).sum(dim=axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """Per-example cross-entropy of integer ``target`` against ``output`` (or the logits it keeps, as Keras)."""
    output, from_logits = take_logits(output, from_logits, "Softmax", "sparse_categorical_crossentropy")
    target = _t(target).long()
    if target.ndim == _t(output).ndim:
        target = target.squeeze(axis)
    log_p = _probabilities(output, from_logits, axis)
    return -torch.gather(torch.movedim(log_p, axis, -1), -1, target.unsqueeze(-1)).squeeze(-1)


def binary_crossentropy(target, output, from_logits=False):
    """Element-wise binary cross-entropy (not averaged); from the logits ``output`` keeps, if any, as Keras."""
    output, from_logits = take_logits(output, from_logits, "Sigmoid", "binary_crossentropy")
    target, output = _float(target), _float(output)
    if from_logits:
        return F.binary_cross_entropy_with_logits(output, target, reduction="none")
    output = output.clamp(backend.epsilon(), 1 - backend.epsilon())
    return -(target * torch.log(output) + (1 - target) * torch.log(1 - output))


def moments(x, axes, keepdims=False, synchronized=False):
    """(mean, variance) of ``x`` over ``axes``."""
    x = _float(x)
    dims = _dims(x, axes)
    mean = x.mean(dim=dims, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=dims, keepdim=keepdims)
    return (mean if keepdims else mean.squeeze(dims)), variance


def normalize(x, axis=-1, order=2, epsilon=None):
    """``x`` divided by its ``order``-norm along ``axis``."""
    eps = backend.epsilon() if epsilon is None else epsilon
    return F.normalize(_float(x), p=order, dim=axis, eps=eps)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis``, computed stably."""
    x = _float(x)
    return torch.logsumexp(x, dim=_dims(x, axis), keepdim=keepdims)


def top_k(x, k, sorted=True):  # noqa: A002 - Keras's argument name
    """(values, indices) of the ``k`` largest entries along the last axis."""
    values, indices = torch.topk(_t(x), k, dim=-1, sorted=sorted)
    return values, indices


def in_top_k(targets, predictions, k):
    """Whether each target's prediction is among the ``k`` largest of its row."""
    predictions, targets = _t(predictions), _t(targets).long()
    kth = torch.topk(predictions, k, dim=-1).values[..., -1:]
    return (predictions.gather(-1, targets.unsqueeze(-1)) >= kth).squeeze(-1)


def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """Sums of ``data``'s rows grouped by ``segment_ids``."""
    data, ids = _t(data), _t(segment_ids).long()
    count = int(ids.max()) + 1 if num_segments is None else num_segments
    out = torch.zeros((count,) + tuple(data.shape[1:]), dtype=data.dtype, device=data.device)
    return out.index_add_(0, ids, data)


def segment_max(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """Maxima of ``data``'s rows grouped by ``segment_ids`` (empty segments: -inf, or the int dtype's min)."""
    data, ids = _t(data), _t(segment_ids).long()
    count = int(ids.max()) + 1 if num_segments is None else num_segments
    fill = -math.inf if data.is_floating_point() else torch.iinfo(data.dtype).min   # -inf overflows ints
    out = torch.full((count,) + tuple(data.shape[1:]), fill, dtype=data.dtype, device=data.device)
    index = ids.reshape((-1,) + (1,) * (data.ndim - 1)).expand_as(data)
    return out.scatter_reduce(0, index, data, reduce="amax")


__getattr__ = flat_namespace_names(__name__, "ops.nn", globals(), "multidev.keras.ops")
