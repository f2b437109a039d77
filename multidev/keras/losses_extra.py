"""Keras 3's remaining per-sample losses and their classes (reached through ``md.keras.losses``).

Each follows Keras 3's formula and clipping (``backend.epsilon()``) so values equal TensorFlow 2.21's
tf.keras to float32 rounding (``tests/keras/test_loss_metric_sweep.py``).

Example:
    md.keras.losses.LogCosh()(y_true, y_pred)
    md.keras.losses.kl_divergence(p, q)              # one value per sample
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from multidev.keras import backend
from multidev.keras.losses import LossFunctionWrapper, _as_tensor, _float


def mean_absolute_percentage_error(y_true, y_pred):
    """100 * mean(|y_true - y_pred| / max(|y_true|, eps)) over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    return 100.0 * torch.abs((y_true - y_pred) / torch.clamp(torch.abs(y_true), min=backend.epsilon())).mean(-1)


def mean_squared_logarithmic_error(y_true, y_pred):
    """mean((log(max(y_pred, eps) + 1) - log(max(y_true, eps) + 1))^2) over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    eps = backend.epsilon()
    first, second = torch.log(y_pred.clamp(min=eps) + 1.0), torch.log(y_true.clamp(min=eps) + 1.0)
    return torch.square(first - second).mean(-1)


def _l2_normalize(x, axis):
    """x * min(1/||x||, 1/eps), Keras's normalize (a zero vector stays zero)."""
    inv = torch.rsqrt(torch.square(x).sum(dim=axis, keepdim=True))
    return x * torch.clamp(inv, max=1.0 / backend.epsilon())


def cosine_similarity(y_true, y_pred, axis=-1):
    """Minus the cosine of the angle between ``y_true`` and ``y_pred`` along ``axis`` (-1 = aligned)."""
    y_true, y_pred = _float(y_true, y_pred)
    return -(_l2_normalize(y_true, axis) * _l2_normalize(y_pred, axis)).sum(dim=axis)


def log_cosh(y_true, y_pred):
    """mean(log(cosh(y_pred - y_true))) over the last axis, in the overflow-free form x + softplus(-2x) - log 2."""
    y_true, y_pred = _float(y_true, y_pred)
    x = y_pred - y_true
    return (x + F.softplus(x * -2.0) - math.log(2.0)).mean(-1)


def kl_divergence(y_true, y_pred):
    """sum(y_true * log(y_true / y_pred)) over the last axis, both clipped to [eps, 1]."""
    y_true, y_pred = _float(y_true, y_pred)
    eps = backend.epsilon()
    y_true, y_pred = y_true.clamp(eps, 1.0), y_pred.clamp(eps, 1.0)
    return (y_true * torch.log(y_true / y_pred)).sum(-1)


def poisson(y_true, y_pred):
    """mean(y_pred - y_true * log(y_pred + eps)) over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    return (y_pred - y_true * torch.log(y_pred + backend.epsilon())).mean(-1)


def _hinge_labels(y_true):
    """0/1 labels become -1/+1 (Keras converts only when every label is 0 or 1)."""
    binary = torch.logical_or(y_true == 0, y_true == 1).all()
    return torch.where(binary, 2.0 * y_true - 1.0, y_true)


def hinge(y_true, y_pred):
    """mean(max(1 - y_true * y_pred, 0)) over the last axis; labels -1/+1 (or 0/1, converted)."""
    y_true, y_pred = _float(y_true, y_pred)
    return torch.clamp(1.0 - _hinge_labels(y_true) * y_pred, min=0.0).mean(-1)


def squared_hinge(y_true, y_pred):
    """mean(max(1 - y_true * y_pred, 0)^2) over the last axis; labels -1/+1 (or 0/1, converted)."""
    y_true, y_pred = _float(y_true, y_pred)
    return torch.square(torch.clamp(1.0 - _hinge_labels(y_true) * y_pred, min=0.0)).mean(-1)


def categorical_hinge(y_true, y_pred):
    """max(max((1 - y_true) * y_pred) - sum(y_true * y_pred) + 1, 0) for one-hot labels."""
    y_true, y_pred = _float(y_true, y_pred)
    pos = (y_true * y_pred).sum(-1)
    neg = ((1.0 - y_true) * y_pred).amax(-1)
    return torch.clamp(neg - pos + 1.0, min=0.0)


def binary_focal_crossentropy(y_true, y_pred, apply_class_balancing=False, alpha=0.25, gamma=2.0,
                              from_logits=False, label_smoothing=0.0, axis=-1):
    """Binary cross-entropy scaled by (1 - p_t)^gamma (and alpha per class with class balancing)."""
    y_true, y_pred = _float(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        y_pred = torch.sigmoid(y_pred)
    eps = backend.epsilon()
    p = y_pred.clamp(eps, 1.0 - eps)
    bce = -(y_true * torch.log(p + eps) + (1 - y_true) * torch.log(1 - p + eps))
    p_t = y_true * y_pred + (1 - y_true) * (1 - y_pred)
    focal = torch.pow(1.0 - p_t, gamma) * bce
    if apply_class_balancing:
        focal = (y_true * alpha + (1 - y_true) * (1 - alpha)) * focal
    return focal.mean(dim=axis)


def categorical_focal_crossentropy(y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False,
                                   label_smoothing=0.0, axis=-1):
    """Categorical cross-entropy per class scaled by alpha * (1 - p)^gamma, summed over ``axis``."""
    y_true, y_pred = _float(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / y_true.shape[-1]
    if from_logits:
        y_pred = torch.softmax(y_pred, dim=axis)
    eps = backend.epsilon()
    output = (y_pred / y_pred.sum(dim=axis, keepdim=True)).clamp(eps, 1.0 - eps)
    cce = -y_true * torch.log(output)
    return (torch.pow(1.0 - output, gamma) * alpha * cce).sum(dim=axis)


def dice(y_true, y_pred, axis=None):
    """1 - 2 sum(y_true y_pred) / (sum(y_true) + sum(y_pred) + eps) over ``axis`` (None: everything)."""
    y_true, y_pred = _float(y_true, y_pred)
    total = lambda x: x.sum() if axis is None else x.sum(dim=axis)
    return 1 - 2.0 * total(y_true * y_pred) / (total(y_true) + total(y_pred) + backend.epsilon())


def tversky(y_true, y_pred, alpha=0.5, beta=0.5, axis=None):
    """1 - TP / (TP + alpha FP + beta FN + eps) with soft counts over ``axis`` (None: everything)."""
    y_true, y_pred = _float(y_true, y_pred)
    total = lambda x: x.sum() if axis is None else x.sum(dim=axis)
    tp = total(y_true * y_pred)
    fp, fn = total((1 - y_pred) * y_true), total(y_pred * (1 - y_true))
    return 1 - tp / (tp + fp * alpha + fn * beta + backend.epsilon())


def categorical_generalized_cross_entropy(y_true, y_pred, q):
    """(1 - p^q) / q with p the predicted probability of the integer label (robust to noisy labels)."""
    y_pred = torch.as_tensor(y_pred)
    y_pred = y_pred if y_pred.is_floating_point() else y_pred.float()
    labels = torch.as_tensor(y_true, device=y_pred.device).long()
    p = (y_pred * F.one_hot(labels, y_pred.shape[-1]).to(y_pred.dtype)).sum(-1)
    return (1 - torch.pow(p, q)) / q


def pearson_correlation(y_true, y_pred, axis=-1):
    """Pearson's correlation along ``axis`` (population standard deviations)."""
    y_true, y_pred = _float(y_true, y_pred)
    t = y_true - y_true.mean(dim=axis, keepdim=True)
    p = y_pred - y_pred.mean(dim=axis, keepdim=True)
    t = t / t.std(dim=axis, keepdim=True, correction=0)
    p = p / p.std(dim=axis, keepdim=True, correction=0)
    return (t * p).mean(dim=axis)


def concordance_correlation(y_true, y_pred, axis=-1):
    """Lin's concordance correlation along ``axis``, in Keras 3's formula."""
    y_true, y_pred = _float(y_true, y_pred)
    t_mean, p_mean = y_true.mean(dim=axis, keepdim=True), y_pred.mean(dim=axis, keepdim=True)
    t_var = (y_true - t_mean).var(dim=axis, keepdim=True, correction=0)
    p_var = (y_pred - p_mean).var(dim=axis, keepdim=True, correction=0)
    covar = (y_true - p_mean) * (y_pred - p_mean)
    norm = t_var + p_var + torch.square(t_mean - p_mean)
    return (2 * covar / (norm + backend.epsilon())).mean(dim=axis)


def ctc(y_true, y_pred):
    """Keras 3's CTC loss: integer labels (batch, max_length) with 0 the blank and padding, logits (batch, steps,
    classes); one loss per example."""
    from multidev.keras.ops.ctc import ctc_loss
    y_true, y_pred = _as_tensor(y_true), _as_tensor(y_pred)
    if y_true.ndim != 2:
        raise ValueError("Targets `y_true` are expected to be a tensor of shape `(batch_size, max_length)` in integer "
                         f"format. Received: y_true.shape={tuple(y_true.shape)!r}")
    if y_pred.ndim != 3:
        raise ValueError("Logits `y_pred` are expected to be a tensor of shape `(batch_size, max_length, num_classes)`. "
                         f"Received: y_pred.shape={tuple(y_pred.shape)!r}")
    steps = torch.full((y_pred.shape[0],), y_pred.shape[1], dtype=torch.int32)
    return ctc_loss(y_true, y_pred, (y_true != 0).sum(dim=-1), steps, mask_index=0)


def _wrapper(fn, default_name, doc, **defaults):
    """A LossFunctionWrapper subclass around ``fn`` whose constructor takes ``defaults`` as keywords."""

    def __init__(self, reduction="sum_over_batch_size", name=default_name, **kwargs):
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword argument(s) {unknown}; "
                            f"it takes {sorted(defaults)}, reduction and name.")
        LossFunctionWrapper.__init__(self, fn, reduction, name, **{**defaults, **kwargs})

    return __init__, doc


def _loss_class(class_name, fn, default_name, doc, **defaults):
    init, doc = _wrapper(fn, default_name, doc, **defaults)
    return type(class_name, (LossFunctionWrapper,), {"__init__": init, "__doc__": doc, "__module__": __name__})


MeanAbsolutePercentageError = _loss_class("MeanAbsolutePercentageError", mean_absolute_percentage_error,
                                          "mean_absolute_percentage_error", "Mean absolute percentage error.")
MeanSquaredLogarithmicError = _loss_class("MeanSquaredLogarithmicError", mean_squared_logarithmic_error,
                                          "mean_squared_logarithmic_error", "Mean squared logarithmic error.")
CosineSimilarity = _loss_class("CosineSimilarity", cosine_similarity, "cosine_similarity",
                               "Minus the cosine similarity along ``axis``.", axis=-1)
LogCosh = _loss_class("LogCosh", log_cosh, "log_cosh", "Mean log(cosh(error)).")
KLDivergence = _loss_class("KLDivergence", kl_divergence, "kl_divergence", "Kullback-Leibler divergence.")
Poisson = _loss_class("Poisson", poisson, "poisson", "Poisson negative log-likelihood (up to a constant).")
Hinge = _loss_class("Hinge", hinge, "hinge", "Hinge loss for -1/+1 (or 0/1) labels.")
SquaredHinge = _loss_class("SquaredHinge", squared_hinge, "squared_hinge", "Squared hinge loss.")
CategoricalHinge = _loss_class("CategoricalHinge", categorical_hinge, "categorical_hinge",
                               "Hinge loss for one-hot labels.")
BinaryFocalCrossentropy = _loss_class(
    "BinaryFocalCrossentropy", binary_focal_crossentropy, "binary_focal_crossentropy",
    "Focal binary cross-entropy.", apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
    label_smoothing=0.0, axis=-1)
CategoricalFocalCrossentropy = _loss_class(
    "CategoricalFocalCrossentropy", categorical_focal_crossentropy, "categorical_focal_crossentropy",
    "Focal categorical cross-entropy.", alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1)

Dice = _loss_class("Dice", dice, "dice", "Dice loss (1 - soft Dice coefficient).", axis=None)
CTC = _loss_class("CTC", ctc, "ctc", "Connectionist Temporal Classification loss of integer labels under logits.")
Tversky = _loss_class("Tversky", tversky, "tversky", "Tversky loss (1 - soft Tversky index).", alpha=0.5, beta=0.5,
                      axis=None)


class CategoricalGeneralizedCrossEntropy(LossFunctionWrapper):
    """Generalized cross-entropy for integer labels, ``q`` in (0, 1) (q -> 0: cross-entropy; 1: MAE)."""

    def __init__(self, q=0.5, reduction="sum_over_batch_size", name="categorical_generalized_cross_entropy"):
        if not 0 < q < 1:
            raise ValueError(f"q must be in the interval (0, 1). Received: q={q!r}")
        super().__init__(categorical_generalized_cross_entropy, reduction, name, q=q)


mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence = kl_divergence
logcosh = log_cosh

CLASSES = {c.__name__: c for c in (
    MeanAbsolutePercentageError, MeanSquaredLogarithmicError, CosineSimilarity, LogCosh, KLDivergence, Poisson,
    Hinge, SquaredHinge, CategoricalHinge, BinaryFocalCrossentropy, CategoricalFocalCrossentropy, Dice, Tversky,
    CategoricalGeneralizedCrossEntropy, CTC)}
FUNCTIONS = {
    "mean_absolute_percentage_error": mape, "mape": mape, "MAPE": mape,
    "mean_squared_logarithmic_error": msle, "msle": msle, "MSLE": msle, "cosine_similarity": cosine_similarity,
    "log_cosh": log_cosh, "logcosh": log_cosh, "kl_divergence": kld, "kld": kld, "KLD": kld,
    "kullback_leibler_divergence": kld, "poisson": poisson, "hinge": hinge, "squared_hinge": squared_hinge,
    "categorical_hinge": categorical_hinge, "binary_focal_crossentropy": binary_focal_crossentropy,
    "categorical_focal_crossentropy": categorical_focal_crossentropy, "dice": dice, "tversky": tversky,
    "categorical_generalized_cross_entropy": categorical_generalized_cross_entropy, "ctc": ctc,
}
