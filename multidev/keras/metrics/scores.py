"""Keras 3's IoU family, F-scores, R2Score and the sensitivity/specificity family.

Each keeps sums (a confusion matrix, per-class counts, per-threshold counts) so replicas merge
exactly, and computes its result as Keras 3 does (``backend.epsilon()`` where Keras adds it).

Example:
    iou = md.keras.metrics.MeanIoU(num_classes=3)
    iou.update_state([0, 1, 2], [0, 2, 2]); float(iou.result())
"""

from __future__ import annotations

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.keras import backend
from multidev.keras.metrics.base import Metric, as_tensor
from multidev.keras.metrics.confusion import _confusion, _div, _prepare


class IoU(Metric):
    """Intersection over union of ``target_class_ids`` from a weighted confusion matrix (Keras's default
    dtype is int: weights are truncated to integers, as in Keras)."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_true=True, sparse_y_pred=True, axis=-1):
        if max(target_class_ids) >= num_classes:
            raise ValueError(f"Target class id {max(target_class_ids)} is out of range, which is [0, {num_classes}).")
        super().__init__(name, dtype or "int64")
        self.num_classes, self.target_class_ids = num_classes, list(target_class_ids)
        self.ignore_class, self.sparse_y_true, self.sparse_y_pred, self.axis = ignore_class, sparse_y_true, sparse_y_pred, axis
        self.add_variable("total_confusion_matrix", (num_classes, num_classes))

    def _ids(self, y_true, y_pred):
        y_true, y_pred = as_tensor(y_true), as_tensor(y_pred)
        if not self.sparse_y_true:
            y_true = y_true.argmax(self.axis)
        if not self.sparse_y_pred:
            y_pred = y_pred.argmax(self.axis)
        return y_true, y_pred

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = self._ids(y_true, y_pred)
        y_true, y_pred = y_true.to(self.dtype).reshape(-1), y_pred.to(self.dtype).reshape(-1)
        w = torch.ones(()) if sample_weight is None else as_tensor(sample_weight).reshape(-1)
        try:
            w = torch.broadcast_to(w.to(self.dtype), y_true.shape)
        except RuntimeError as e:
            raise InvalidArgumentError(f"sample_weight of {w.numel()} values does not broadcast to the "
                                       f"{y_true.numel()} labels (both flattened).") from e
        keep = (y_true >= 0) & (y_true < self.num_classes) & (y_pred >= 0) & (y_pred < self.num_classes)
        if self.ignore_class is not None:
            keep &= y_true != self.ignore_class
        w = torch.where(keep, w, torch.zeros_like(w))
        cells = torch.where(keep, y_true, 0).long() * self.num_classes + torch.where(keep, y_pred, 0).long()
        cm = torch.bincount(cells, weights=w.double(), minlength=self.num_classes ** 2)
        with torch.no_grad():
            self.total_confusion_matrix.add_(cm.view(self.num_classes, self.num_classes).to(self.dtype))

    def result(self):
        cm = self.total_confusion_matrix.float()
        tp = torch.diagonal(cm)
        denominator = (cm.sum(0) + cm.sum(1) - tp)[self.target_class_ids]
        tp = tp[self.target_class_ids]
        valid = denominator > 1e-9
        iou = torch.where(valid, tp / (denominator + backend.epsilon()), torch.zeros_like(tp))
        return iou.sum() / (valid.float().sum() + backend.epsilon())

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "target_class_ids": self.target_class_ids,
                "ignore_class": self.ignore_class, "sparse_y_true": self.sparse_y_true,
                "sparse_y_pred": self.sparse_y_pred, "axis": self.axis}


class MeanIoU(IoU):
    """IoU averaged over every class."""

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None, sparse_y_true=True,
                 sparse_y_pred=True, axis=-1):
        super().__init__(num_classes, list(range(num_classes)), name, dtype, ignore_class, sparse_y_true,
                         sparse_y_pred, axis)


class BinaryIoU(IoU):
    """IoU of 0/1 labels against ``y_pred >= threshold``."""

    def __init__(self, target_class_ids=(0, 1), threshold=0.5, name=None, dtype=None):
        super().__init__(2, target_class_ids, name, dtype)
        self.threshold = threshold

    def _ids(self, y_true, y_pred):
        return as_tensor(y_true), (as_tensor(y_pred).float() >= self.threshold)


class OneHotIoU(IoU):
    """IoU of one-hot labels (and predictions' argmax)."""

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, target_class_ids, name, dtype, ignore_class, False, sparse_y_pred, axis)


class OneHotMeanIoU(MeanIoU):
    """MeanIoU of one-hot labels (and predictions' argmax)."""

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None, sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, name, dtype, ignore_class, False, sparse_y_pred, axis)


class FBetaScore(Metric):
    """F-beta per class from thresholded predictions (the row's maximum without ``threshold``), averaged
    'micro', 'macro', 'weighted' or not at all (None)."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")
    _COUNTS = ("true_positives", "false_positives", "false_negatives", "intermediate_weights")

    def __init__(self, average=None, beta=1.0, threshold=None, name="fbeta_score", dtype=None):
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError("Invalid `average` argument value. Expected one of: {None, 'micro', 'macro', "
                             f"'weighted'}}. Received: average={average!r}")
        if not isinstance(beta, float) or beta <= 0.0:
            raise ValueError(f"Invalid `beta` argument value: a Python float > 0. Received: beta={beta!r}")
        if threshold is not None and (not isinstance(threshold, float) or not 0.0 < threshold <= 1.0):
            raise ValueError(f"Invalid `threshold` argument value: a Python float in (0, 1]. Received: {threshold!r}")
        super().__init__(name, dtype)
        self.average, self.beta, self.threshold = average, beta, threshold
        for n in self._COUNTS:
            self.add_variable(n, ())

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = as_tensor(y_pred).to(self.dtype)
        y_true = as_tensor(y_true, y_pred.device).to(self.dtype)
        if y_pred.ndim != 2 or y_true.ndim != 2:
            raise ValueError(f"{type(self).__name__} expects 2D inputs with shape (batch_size, output_dim). "
                             f"Received input shapes: y_pred.shape={tuple(y_pred.shape)} and "
                             f"y_true.shape={tuple(y_true.shape)}.")
        if self.average != "micro":
            self._shape_state(self._COUNTS, (y_pred.shape[-1],))
        if self.threshold is None:
            y_pred = ((y_pred >= y_pred.amax(-1, keepdim=True)) & (y_pred.abs() > 1e-9)).to(self.dtype)
        else:
            y_pred = (y_pred > self.threshold).to(self.dtype)
        w = None if sample_weight is None else as_tensor(sample_weight, y_pred.device).to(self.dtype).unsqueeze(1)
        dims = None if self.average == "micro" else 0

        def total(v):
            v = v if w is None else v * w
            return v.sum() if dims is None else v.sum(dims)

        with torch.no_grad():
            self.true_positives.add_(total(y_pred * y_true))
            self.false_positives.add_(total(y_pred * (1 - y_true)))
            self.false_negatives.add_(total((1 - y_pred) * y_true))
            self.intermediate_weights.add_(total(y_true))

    def result(self):
        eps, b2 = backend.epsilon(), self.beta ** 2
        tp = self.true_positives
        precision = tp / (tp + self.false_positives + eps)
        recall = tp / (tp + self.false_negatives + eps)
        f = precision * recall / (b2 * precision + recall + eps) * (1 + b2)
        if self.average == "weighted":
            weights = self.intermediate_weights
            return (f * (weights / (weights.sum() + eps))).sum()
        return f.mean() if self.average is not None else f

    def get_config(self):
        return {**super().get_config(), "average": self.average, "beta": self.beta, "threshold": self.threshold}


class F1Score(FBetaScore):
    """FBetaScore with beta = 1."""

    def __init__(self, average=None, threshold=None, name="f1_score", dtype=None):
        super().__init__(average, 1.0, threshold, name, dtype)


class R2Score(Metric):
    """Coefficient of determination per output, averaged ('uniform_average', 'variance_weighted_average')
    or not (None); ``num_regressors`` > 0 adjusts it."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")
    _SUMS = ("squared_sum", "sum", "residual", "count")

    def __init__(self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None):
        if class_aggregation not in (None, "uniform_average", "variance_weighted_average"):
            raise ValueError("Invalid value for argument `class_aggregation`. Expected one of (None, "
                             f"'uniform_average', 'variance_weighted_average'). Received: {class_aggregation!r}")
        if num_regressors < 0:
            raise ValueError(f"Invalid value for argument `num_regressors`: >= 0. Received: {num_regressors!r}")
        super().__init__(name, dtype)
        self.class_aggregation, self.num_regressors = class_aggregation, num_regressors
        self.add_variable("num_samples")
        for n in self._SUMS:
            self.add_variable(n, ())

    def update_state(self, y_true, y_pred, sample_weight=None):
        from multidev.keras.losses import align_ranks

        y_true, y_pred = align_ranks(as_tensor(y_true).to(self.dtype), as_tensor(y_pred).to(self.dtype))
        if y_pred.ndim != 2 or y_true.ndim != 2:
            raise ValueError("R2Score expects 2D inputs with shape (batch_size, output_dim). Received input "
                             f"shapes: y_pred.shape={tuple(y_pred.shape)} and y_true.shape={tuple(y_true.shape)}.")
        self._shape_state(self._SUMS, (y_pred.shape[-1],))
        w = torch.ones(()) if sample_weight is None else as_tensor(sample_weight).to(self.dtype)
        w = torch.broadcast_to(w.unsqueeze(1) if w.ndim == 1 else w, y_true.shape)
        weighted = y_true * w
        with torch.no_grad():
            self.sum.add_(weighted.sum(0))
            self.squared_sum.add_((y_true * weighted).sum(0))
            self.residual.add_(((y_true - y_pred) ** 2 * w).sum(0))
            self.count.add_(w.sum(0))
            self.num_samples.add_(y_true.numel())

    def result(self):
        mean = self.sum / self.count
        total = self.squared_sum - self.sum * mean
        raw = 1 - self.residual / total
        raw = torch.where(torch.isinf(raw), torch.zeros_like(raw), raw)
        if self.class_aggregation == "uniform_average":
            score = raw.mean()
        elif self.class_aggregation == "variance_weighted_average":
            score = (total * raw).sum() / total.sum()
        else:
            score = raw
        n, p = float(self.num_samples), self.num_regressors
        if p and p < n - 1:
            score = 1 - (1 - score) * (n - 1) / (n - p - 1)
        return score

    def get_config(self):
        return {**super().get_config(), "class_aggregation": self.class_aggregation,
                "num_regressors": self.num_regressors}


class _AtConstraint(Metric):
    """Confusion counts at ``num_thresholds`` thresholds evenly spread over [0, 1]; the result is the best
    ``dependent`` rate over the thresholds where ``constrained`` >= ``value``."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")
    _COUNTS = ("true_positives", "false_positives", "true_negatives", "false_negatives")

    def __init__(self, value, what, num_thresholds=200, class_id=None, name=None, dtype=None):
        if not 0 <= value <= 1:
            raise ValueError(f"Argument `{what}` must be in the range [0, 1]. Received: {what}={value!r}")
        if num_thresholds <= 0:
            raise ValueError(f"Argument `num_thresholds` must be an integer > 0. Received: {num_thresholds!r}")
        super().__init__(name, dtype)
        setattr(self, what, value)
        self.value, self._what, self.num_thresholds, self.class_id = value, what, num_thresholds, class_id
        inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        self.thresholds = torch.tensor([0.5] if num_thresholds == 1 else [0.0] + inner + [1.0])
        for n in self._COUNTS:
            self.add_variable(n, (len(self.thresholds),))

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, preds, w = _prepare(y_true, y_pred, sample_weight, class_id=self.class_id)
        self._to_device(preds.device)
        counts = _confusion(labels, preds, w, self.thresholds.to(preds.device), len(self.thresholds) > 1)   # as Keras
        with torch.no_grad():
            for n, c in zip(("true_positives", "false_positives", "true_negatives", "false_negatives"), counts):
                getattr(self, n).add_(c)

    def _rates(self):
        tp, fp, tn, fn = (getattr(self, n) for n in self._COUNTS)
        recall = _div(tp, tp + fn)
        return {"recall": recall, "sensitivity": recall, "precision": _div(tp, tp + fp), "specificity": _div(tn, tn + fp)}

    def _best(self, constrained, dependent):
        rates = self._rates()
        feasible = rates[constrained] >= self.value
        return torch.where(feasible, rates[dependent], torch.zeros_like(rates[dependent])).amax().clamp_min(0)

    def get_config(self):
        return {**super().get_config(), self._what: self.value, "num_thresholds": self.num_thresholds,
                "class_id": self.class_id}


class PrecisionAtRecall(_AtConstraint):
    """The best precision where recall >= ``recall``."""

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(recall, "recall", num_thresholds, class_id, name, dtype)

    def result(self):
        return self._best("recall", "precision")


class RecallAtPrecision(_AtConstraint):
    """The best recall where precision >= ``precision``."""

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(precision, "precision", num_thresholds, class_id, name, dtype)

    def result(self):
        return self._best("precision", "recall")


class SensitivityAtSpecificity(_AtConstraint):
    """The best sensitivity (recall) where specificity >= ``specificity``."""

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(specificity, "specificity", num_thresholds, class_id, name, dtype)

    def result(self):
        return self._best("specificity", "sensitivity")


class SpecificityAtSensitivity(_AtConstraint):
    """The best specificity where sensitivity (recall) >= ``sensitivity``."""

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(sensitivity, "sensitivity", num_thresholds, class_id, name, dtype)

    def result(self):
        return self._best("sensitivity", "specificity")


CLASSES = (IoU, MeanIoU, BinaryIoU, OneHotIoU, OneHotMeanIoU, FBetaScore, F1Score, R2Score, PrecisionAtRecall,
           RecallAtPrecision, SensitivityAtSpecificity, SpecificityAtSensitivity)
