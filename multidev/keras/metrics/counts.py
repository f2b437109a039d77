"""Confusion counts as metrics: TruePositives, FalsePositives, TrueNegatives, FalseNegatives.

Keras 3's ``metrics.FalseNegatives(thresholds=None)``: the (weighted) count at each threshold, a
prediction counting as positive when ``pred > threshold`` (0.5 by default). Counts are sums, so
merging per-replica states is exact.

Example:
    fn = md.keras.metrics.FalseNegatives()
    fn.update_state([0, 1, 1], [0.2, 0.3, 0.9]); float(fn.result())   # 1.0
"""

from __future__ import annotations

import torch

from multidev.keras.metrics.base import Metric
from multidev.keras.metrics.confusion import _confusion, _prepare, evenly_spaced


class _ConfusionCount(Metric):
    """One of the four confusion counts per threshold; ``_which`` indexes (tp, fp, tn, fn)."""

    _which = 0
    _default_name = ""

    def __init__(self, thresholds=None, name=None, dtype=None):
        super().__init__(name or self._default_name, dtype)
        self._single = thresholds is None or isinstance(thresholds, (int, float))
        values = [0.5 if thresholds is None else thresholds] if self._single else list(thresholds)
        for t in values:
            if not 0 <= t <= 1:
                raise ValueError(f"Threshold values must be in [0, 1]. Received: thresholds={thresholds!r}")
        self.init_thresholds = thresholds
        self.thresholds = torch.tensor(values, dtype=torch.float32)
        self._evenly = evenly_spaced(values)
        self.add_variable("accumulator", (len(values),))

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels, preds, w = _prepare(y_true, y_pred, sample_weight)
        self._to_device(preds.device)
        count = _confusion(labels, preds, w, self.thresholds.to(preds.device), self._evenly)[self._which]
        with torch.no_grad():
            self.accumulator.add_(count)

    def result(self):
        return self.accumulator[0] if self._single else self.accumulator

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds}


class TruePositives(_ConfusionCount):
    """Weighted count of positive labels predicted positive."""

    _which, _default_name = 0, "true_positives"


class FalsePositives(_ConfusionCount):
    """Weighted count of negative labels predicted positive."""

    _which, _default_name = 1, "false_positives"


class TrueNegatives(_ConfusionCount):
    """Weighted count of negative labels predicted negative."""

    _which, _default_name = 2, "true_negatives"


class FalseNegatives(_ConfusionCount):
    """Weighted count of positive labels predicted negative."""

    _which, _default_name = 3, "false_negatives"
