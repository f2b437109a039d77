"""Threshold-based metrics: Precision, Recall and AUC (confusion counts per threshold).

Counts are sums, so merging per-replica states is exact.

Example:
    auc = md.keras.metrics.AUC()                       # 200 thresholds, ROC, interpolation
    auc.update_state([0, 1, 1], [0.1, 0.8, 0.4]); float(auc.result())
"""

from __future__ import annotations

import torch

from multidev.keras.metrics.base import Metric, as_tensor, broadcast_weights

_EPS = 1e-7


_NEG_INF = -1e10   # Keras's threshold when ``top_k`` is set: every kept top-k prediction counts


def _prepare(y_true, y_pred, sample_weight, top_k=None, class_id=None, label_weights=None, flat=True):
    y_pred = as_tensor(y_pred).detach().float()
    y_true = as_tensor(y_true, y_pred.device).float()
    if y_true.numel() != y_pred.numel():   # TF's shape check (broadcast, the counts would be of every pair)
        raise ValueError(f"Shapes {tuple(y_pred.shape)} and {tuple(y_true.shape)} are incompatible: a threshold "
                         "metric compares each prediction with its own label; for class ids against per-class "
                         "scores, one-hot encode the labels.")
    if y_true.ndim == y_pred.ndim - 1:
        y_true = y_true.unsqueeze(-1)
    if top_k is not None:
        kth = y_pred.topk(top_k, dim=-1).values[..., -1:]
        y_pred = torch.where(y_pred >= kth, y_pred, torch.full_like(y_pred, -float("inf")))
    if class_id is not None:
        y_true, y_pred = y_true[..., class_id], y_pred[..., class_id]
    w = broadcast_weights(sample_weight, y_pred) if sample_weight is not None else torch.ones_like(y_pred)
    if label_weights is not None:
        w = w * label_weights.to(w.device)
    if not flat:        # multi-label: (examples, labels)
        return y_true.reshape(-1, y_pred.shape[-1]), y_pred.reshape(-1, y_pred.shape[-1]), w.reshape(-1, y_pred.shape[-1])
    return y_true.reshape(-1), y_pred.reshape(-1), w.reshape(-1)


def evenly_spaced(thresholds) -> bool:
    """Keras's test for thresholds i / (n - 1), n >= 3: its bucketed count, which clips predictions to [0, 1]."""
    values = torch.as_tensor(thresholds, dtype=torch.float64).reshape(-1)
    n = values.numel()
    return n >= 3 and torch.allclose(values, torch.arange(n, dtype=torch.float64) / (n - 1), rtol=1e-5, atol=1e-7)


def _confusion(labels, preds, weights, thresholds, evenly=False):
    """(tp, fp, tn, fn) per threshold (and per label for (N, L) inputs): a prediction counts as
    positive when ``pred > threshold``, a label when it is not 0 (Keras casts labels to bool). With
    ``evenly`` spaced thresholds Keras counts predictions clipped to [0, 1] (logits below 0 pass the -eps
    threshold); other thresholds compare them as they are."""
    labels = (labels != 0).to(weights.dtype)
    if evenly:
        preds = preds.clamp(0.0, 1.0)
    shape = (-1,) + (1,) * preds.ndim
    above = (preds.unsqueeze(0) > thresholds.reshape(shape)).float()      # (T, N) or (T, N, L)
    pos, neg = labels * weights, (1 - labels) * weights
    tp, fp = (above * pos).sum(1), (above * neg).sum(1)
    return tp, fp, neg.sum(0) - fp, pos.sum(0) - tp


class _ThresholdMetric(Metric):
    """Shared state and update for Precision and Recall."""

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        super().__init__(name, dtype)
        self._single = thresholds is None or isinstance(thresholds, (int, float))
        default = 0.5 if top_k is None else _NEG_INF      # Keras: with top_k every kept prediction counts
        values = [default if thresholds is None else thresholds] if self._single else list(thresholds)
        self.init_thresholds = thresholds
        self.thresholds = torch.tensor(values, dtype=torch.float32)
        self._evenly = not self._single and evenly_spaced(values)
        self.top_k, self.class_id = top_k, class_id
        for n in ("true_positives", "false_positives", "false_negatives"):
            self.add_variable(n, (len(values),))

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, preds, w = _prepare(y_true, y_pred, sample_weight, self.top_k, self.class_id)
        self._to_device(preds.device)
        tp, fp, _, fn = _confusion(labels, preds, w, self.thresholds.to(preds.device), self._evenly)
        with torch.no_grad():
            self.true_positives.add_(tp)
            self.false_positives.add_(fp)
            self.false_negatives.add_(fn)

    def _out(self, value):
        return value[0] if self._single else value

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds, "top_k": self.top_k,
                "class_id": self.class_id}


class Precision(_ThresholdMetric):
    """tp / (tp + fp) at each threshold (0.5 by default)."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def result(self):
        tp, fp = self.true_positives, self.false_positives
        return self._out(torch.where(tp + fp > 0, tp / (tp + fp).clamp_min(_EPS), torch.zeros_like(tp)))


class Recall(_ThresholdMetric):
    """tp / (tp + fn) at each threshold (0.5 by default)."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def result(self):
        tp, fn = self.true_positives, self.false_negatives
        return self._out(torch.where(tp + fn > 0, tp / (tp + fn).clamp_min(_EPS), torch.zeros_like(tp)))


def _div(a, b):
    return torch.where(b > 0, a / b.clamp_min(1e-30), torch.zeros_like(a))


class AUC(Metric):
    """Area under the ROC or PR curve from confusion counts at ``num_thresholds`` thresholds.

    Thresholds are evenly spaced in [0, 1] with the ends pushed to -eps and 1+eps, as Keras.
    ``summation_method``: 'interpolation' (trapezoid for ROC, Davis & Goadrich for PR), 'minoring', 'majoring'.
    """

    _CURVES, _METHODS = ("ROC", "PR"), ("interpolation", "minoring", "majoring")
    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation", name=None, dtype=None,
                 thresholds=None, multi_label=False, num_labels=None, label_weights=None, from_logits=False):
        super().__init__(name or "auc", dtype)
        if curve not in self._CURVES:
            raise ValueError(f'Invalid AUC curve value: "{curve}". Expected values are {list(self._CURVES)}.')
        if summation_method not in self._METHODS:
            raise ValueError(f'Invalid AUC summation method value: "{summation_method}". '
                             f"Expected values are {list(self._METHODS)}.")
        if num_labels and not multi_label:
            raise ValueError("`num_labels` is needed only when `multi_label` is True.")
        if thresholds is not None:
            inner = sorted(float(t) for t in thresholds)
        else:
            if num_thresholds <= 1:
                raise ValueError(f"Argument `num_thresholds` must be an integer > 1. Received: num_thresholds={num_thresholds}")
            inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        self.thresholds = torch.tensor([-_EPS] + inner + [1.0 + _EPS], dtype=torch.float32)
        self._evenly = thresholds is None or evenly_spaced([0.0] + inner + [1.0])
        self.num_thresholds = len(self.thresholds)
        self.curve, self.summation_method, self.from_logits = curve, summation_method, from_logits
        self._given_thresholds = thresholds
        self.multi_label, self.num_labels = multi_label, num_labels
        self.label_weights = None if label_weights is None else torch.as_tensor(label_weights, dtype=torch.float32)
        shape = (self.num_thresholds, num_labels) if multi_label and num_labels else (self.num_thresholds,)
        for n in self._COUNTS:
            self.add_variable(n, shape)

    _COUNTS = ("true_positives", "false_positives", "true_negatives", "false_negatives")

    def update_state(self, y_true, y_pred, sample_weight=None):
        label_weights = None if self.multi_label else self.label_weights
        labels, preds, w = _prepare(y_true, y_pred, sample_weight, label_weights=label_weights,
                                    flat=not self.multi_label)
        if self.from_logits:
            preds = torch.sigmoid(preds)
        if self.multi_label:
            self._shape_state(self._COUNTS, (self.num_thresholds, preds.shape[-1]))   # per label
        self._to_device(preds.device)
        tp, fp, tn, fn = _confusion(labels, preds, w, self.thresholds.to(preds.device), self._evenly)
        with torch.no_grad():
            self.true_positives.add_(tp)
            self.false_positives.add_(fp)
            self.true_negatives.add_(tn)
            self.false_negatives.add_(fn)

    def result(self):
        tp, fp, tn, fn = self.true_positives, self.false_positives, self.true_negatives, self.false_negatives
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._over_labels(self._pr_interpolated(tp, fp, fn).sum(0))
        if self.curve == "ROC":
            x, y = _div(fp, fp + tn), _div(tp, tp + fn)
        else:
            x, y = _div(tp, tp + fn), _div(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2
        elif self.summation_method == "minoring":
            heights = torch.minimum(y[:-1], y[1:])
        else:
            heights = torch.maximum(y[:-1], y[1:])
        return self._over_labels(((x[:-1] - x[1:]) * heights).sum(0))

    def _over_labels(self, by_label):
        """Multi-label: the labels' mean AUC (weighted by ``label_weights`` if given), as Keras."""
        if not self.multi_label:
            return by_label
        if self.label_weights is None:
            return by_label.mean()
        lw = self.label_weights.to(by_label.device)
        return _div((by_label * lw).sum(), lw.sum())

    @staticmethod
    def _pr_interpolated(tp, fp, fn):
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = _div(dtp, dp.clamp_min(0))
        intercept = tp[1:] - slope * p[1:]
        both = (p[:-1] > 0) & (p[1:] > 0)
        ratio = torch.where(both, _div(p[:-1], p[1:].clamp_min(0)), torch.ones_like(p[1:]))
        return _div(slope * (dtp + intercept * torch.log(ratio)), (tp[1:] + fn[1:]).clamp_min(0))

    def get_config(self):
        return {**super().get_config(), "num_thresholds": self.num_thresholds, "curve": self.curve,
                "summation_method": self.summation_method, "thresholds": self._given_thresholds,
                "from_logits": self.from_logits, "multi_label": self.multi_label, "num_labels": self.num_labels,
                "label_weights": None if self.label_weights is None else self.label_weights.tolist()}
