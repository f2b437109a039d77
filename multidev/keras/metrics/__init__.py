"""``md.keras.metrics``: exactly aggregatable metrics and per-sample metric functions.

Example:
    model.compile("adam", "sparse_categorical_crossentropy",
                  metrics=[md.keras.metrics.SparseCategoricalAccuracy()])
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
from multidev.keras.losses import (binary_crossentropy, categorical_crossentropy, mae, mean_absolute_error,
                                   mean_squared_error, mse, sparse_categorical_crossentropy)
from multidev.keras.metrics.mean_metrics import (Accuracy, BinaryAccuracy, BinaryCrossentropy, CategoricalAccuracy,
                                             CategoricalCrossentropy, MeanAbsoluteError, MeanSquaredError,
                                             SparseCategoricalAccuracy, SparseCategoricalCrossentropy,
                                             SparseTopKCategoricalAccuracy, TopKCategoricalAccuracy)
from multidev.keras.metrics.base import Mean, MeanMetricWrapper, Metric, Reduce, Sum
from multidev.keras.metrics.confusion import AUC, Precision, Recall
from multidev.keras.losses_extra import concordance_correlation, pearson_correlation
from multidev.keras.metrics.error_metrics import ConcordanceCorrelation, PearsonCorrelation
from multidev.keras.metrics.error_metrics import (CategoricalHinge, CosineSimilarity, Hinge, KLDivergence,
                                                  LogCoshError, MeanAbsolutePercentageError,
                                                  MeanSquaredLogarithmicError, Poisson, RootMeanSquaredError,
                                                  SquaredHinge)
from multidev.keras.losses import huber
from multidev.keras.losses_extra import (binary_focal_crossentropy, categorical_focal_crossentropy, categorical_hinge,
                                         hinge, kl_divergence, log_cosh, mean_absolute_percentage_error,
                                         mean_squared_logarithmic_error, poisson, squared_hinge)
from multidev.keras.metrics import error_metrics as _error_metrics
from multidev.keras.metrics import scores as _scores
from multidev.keras.metrics.scores import (IoU, BinaryIoU, F1Score, FBetaScore, MeanIoU, OneHotIoU, OneHotMeanIoU,
                                           PrecisionAtRecall, R2Score, RecallAtPrecision, SensitivityAtSpecificity,
                                           SpecificityAtSensitivity)
from multidev.keras.metrics.counts import FalseNegatives, FalsePositives, TrueNegatives, TruePositives
from multidev.keras.metrics.functions import (accuracy, binary_accuracy, categorical_accuracy,
                                              sparse_categorical_accuracy, sparse_top_k_categorical_accuracy,
                                              top_k_categorical_accuracy)

_CLASSES = {c.__name__: c for c in (
    Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, TopKCategoricalAccuracy,
    SparseTopKCategoricalAccuracy, MeanSquaredError, MeanAbsoluteError, Mean, Sum, Precision, Recall, AUC,
    BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy, TruePositives, FalsePositives,
    TrueNegatives, FalseNegatives, *_error_metrics.CLASSES, *_scores.CLASSES)}
_NAMES = {
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError, "mae": MeanAbsoluteError,
    "mean_absolute_error": MeanAbsoluteError, "binary_accuracy": BinaryAccuracy,
    "categorical_accuracy": CategoricalAccuracy, "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy, "precision": Precision,
    "recall": Recall, "auc": AUC, "true_positives": TruePositives, "false_positives": FalsePositives,
    "true_negatives": TrueNegatives, "false_negatives": FalseNegatives, "binary_crossentropy": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "mape": MeanAbsolutePercentageError, "mean_absolute_percentage_error": MeanAbsolutePercentageError,
    "msle": MeanSquaredLogarithmicError, "mean_squared_logarithmic_error": MeanSquaredLogarithmicError,
    "cosine_similarity": CosineSimilarity, "logcosh": LogCoshError, "log_cosh": LogCoshError,
    "kl_divergence": KLDivergence, "kld": KLDivergence, "poisson": Poisson, "hinge": Hinge,
    "squared_hinge": SquaredHinge, "categorical_hinge": CategoricalHinge,
}
# Resolved from the loss and the shapes at the first batch (see models.compile_utils). Keras 2's
# 'crossentropy' / 'ce' are unknown to Keras 3 (TensorFlow 2.21 raises ValueError): so here.
SHAPE_DEPENDENT = ("accuracy", "acc")


def get(identifier, name=None) -> Metric:
    """Resolve a metric name ('mae', 'AUC', ...), Metric instance or function into a Metric."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, dict):
        return _CLASSES[identifier["class_name"]].from_config(identifier.get("config", {}))
    if isinstance(identifier, str):
        if identifier in _NAMES:
            return _NAMES[identifier](name=name or identifier)
        if identifier in _CLASSES:
            return _CLASSES[identifier]()
    elif callable(identifier):
        return MeanMetricWrapper(identifier, name=name or identifier.__name__)
    hint = (" Keras 3 (TensorFlow 2.21) dropped Keras 2's 'crossentropy'/'ce': name the loss's metric, e.g. "
            "'sparse_categorical_crossentropy'." if identifier in ("crossentropy", "ce") else "")
    raise ValueError(f"Unknown metric function: {identifier!r}.{hint} Valid names: "
                     f"{sorted(set(_NAMES) | set(_CLASSES) | set(SHAPE_DEPENDENT))}, a Metric instance or a "
                     "callable(y_true, y_pred).")


def deserialize(config: dict) -> Metric:
    """A metric from ``serialize``'s form (or a name)."""
    return get(config)


def serialize(metric: Metric) -> dict:
    """Config form of a built-in metric."""
    return {"class_name": type(metric).__name__, "config": metric.get_config()}


__all__ = [
    "Metric", "Reduce", "Mean", "Sum", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy", "CategoricalAccuracy",
    "SparseCategoricalAccuracy", "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "MeanSquaredError",
    "MeanAbsoluteError", "Precision", "Recall", "AUC", "TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives", "BinaryCrossentropy", "CategoricalCrossentropy",
    "SparseCategoricalCrossentropy", "accuracy", "binary_accuracy", "categorical_accuracy",
    "sparse_categorical_accuracy", "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy",
    "mean_squared_error", "mean_absolute_error", "mse", "mae", "binary_crossentropy", "categorical_crossentropy",
    "sparse_categorical_crossentropy", "get", "serialize", "MeanAbsolutePercentageError",
    "MeanSquaredLogarithmicError", "CosineSimilarity", "LogCoshError", "KLDivergence", "Poisson", "Hinge",
    "SquaredHinge", "CategoricalHinge", "RootMeanSquaredError", "IoU", "MeanIoU", "BinaryIoU", "OneHotIoU",
    "OneHotMeanIoU", "FBetaScore", "F1Score", "R2Score", "PrecisionAtRecall", "RecallAtPrecision",
    "SensitivityAtSpecificity", "SpecificityAtSensitivity", "deserialize", "huber", "binary_focal_crossentropy",
    "categorical_focal_crossentropy", "categorical_hinge", "hinge", "kl_divergence", "log_cosh",
    "mean_absolute_percentage_error", "mean_squared_logarithmic_error", "poisson", "squared_hinge",
    "PearsonCorrelation", "ConcordanceCorrelation", "pearson_correlation", "concordance_correlation",
]

__getattr__ = missing_names(__name__, 'metrics', globals())  # unknown names: does Keras 3 have them?
