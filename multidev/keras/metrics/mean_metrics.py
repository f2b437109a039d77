"""Accuracy and error metrics as running means of per-sample functions.

Example:
    m = md.keras.metrics.SparseTopKCategoricalAccuracy(k=5)
    m.update_state(labels, probs); float(m.result())
"""

from __future__ import annotations

from multidev.keras import losses
from multidev.keras.metrics import functions as f
from multidev.keras.metrics.base import MeanMetricWrapper


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels exactly."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(f.accuracy, name, dtype)


class BinaryAccuracy(MeanMetricWrapper):
    """How often ``(y_pred > threshold)`` matches binary labels."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(f.binary_accuracy, name, dtype, threshold=threshold)


class CategoricalAccuracy(MeanMetricWrapper):
    """How often argmax(y_pred) matches argmax of one-hot labels."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(f.categorical_accuracy, name, dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often argmax(y_pred) matches integer labels."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(f.sparse_categorical_accuracy, name, dtype)


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label is in the top ``k`` predictions."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        super().__init__(f.top_k_categorical_accuracy, name, dtype, k=k)


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label is in the top ``k`` predictions."""

    _direction = "up"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None):
        super().__init__(f.sparse_top_k_categorical_accuracy, name, dtype, k=k)


class MeanSquaredError(MeanMetricWrapper):
    """Running mean of squared errors."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(losses.mean_squared_error, name, dtype)


class MeanAbsoluteError(MeanMetricWrapper):
    """Running mean of absolute errors."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(losses.mean_absolute_error, name, dtype)


class BinaryCrossentropy(MeanMetricWrapper):
    """Running mean of binary cross-entropy."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="binary_crossentropy", dtype=None, from_logits=False, label_smoothing=0.0):
        super().__init__(losses.binary_crossentropy, name, dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing)


class CategoricalCrossentropy(MeanMetricWrapper):
    """Running mean of categorical cross-entropy."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="categorical_crossentropy", dtype=None, from_logits=False, label_smoothing=0.0):
        super().__init__(losses.categorical_crossentropy, name, dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing)


class SparseCategoricalCrossentropy(MeanMetricWrapper):
    """Running mean of sparse categorical cross-entropy."""

    _direction = "down"   # Keras 3: which way is better (callbacks' mode="auto")

    def __init__(self, name="sparse_categorical_crossentropy", dtype=None, from_logits=False):
        super().__init__(losses.sparse_categorical_crossentropy, name, dtype, from_logits=from_logits)
