"""Per-sample metric functions (accuracy variants); losses are re-exported by ``metrics``.

Example:
    md.keras.metrics.sparse_categorical_accuracy([1, 0], probs)   # tensor([1., 0.])
"""

from __future__ import annotations

import torch

from multidev.keras.metrics.base import as_tensor


def _labels_like(y_true, y_pred):
    y_true = as_tensor(y_true, y_pred.device)
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = y_true.squeeze(-1)
    return y_true


def accuracy(y_true, y_pred):
    """1.0 where ``y_true == y_pred`` exactly."""
    y_pred = as_tensor(y_pred)
    y_true = as_tensor(y_true, y_pred.device)
    if y_true.ndim == y_pred.ndim - 1 and y_pred.shape[-1] == 1:
        y_pred = y_pred.squeeze(-1)
    return (y_true.to(y_pred.dtype) == y_pred).float()


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """Mean over the last axis of ``(y_pred > threshold) == y_true``."""
    y_pred = as_tensor(y_pred)
    y_true = as_tensor(y_true, y_pred.device)
    if y_true.ndim == y_pred.ndim - 1:
        y_true = y_true.unsqueeze(-1)
    return ((y_pred > threshold).to(y_pred.dtype) == y_true.to(y_pred.dtype)).float().mean(dim=-1)


def categorical_accuracy(y_true, y_pred):
    """1.0 where argmax of one-hot ``y_true`` equals argmax of ``y_pred``."""
    y_pred = as_tensor(y_pred)
    y_true = _one_hot(y_true, y_pred)
    return (y_true.argmax(dim=-1) == y_pred.argmax(dim=-1)).float()


def _one_hot(y_true, y_pred):
    """One-hot targets as a tensor ``argmax`` takes: a bool array (keras.io's addition RNN encodes its targets so)
    as uint8, as Keras 3's torch backend casts it."""
    y_true = as_tensor(y_true, y_pred.device)
    return y_true.to(torch.uint8) if y_true.dtype == torch.bool else y_true


def sparse_categorical_accuracy(y_true, y_pred):
    """1.0 where integer ``y_true`` equals argmax of ``y_pred``."""
    y_pred = as_tensor(y_pred)
    y_true = _labels_like(y_true, y_pred)
    return (y_true.long() == y_pred.argmax(dim=-1)).float()


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where the true class (argmax of one-hot) is among the ``k`` highest predictions."""
    y_pred = as_tensor(y_pred)
    y_true = as_tensor(y_true, y_pred.device)
    return sparse_top_k_categorical_accuracy(_one_hot(y_true, as_tensor(y_pred)).argmax(dim=-1), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where the integer label is among the ``k`` highest predictions."""
    y_pred = as_tensor(y_pred)
    y_true = _labels_like(y_true, y_pred).long()
    k = min(k, y_pred.shape[-1])
    top = y_pred.topk(k, dim=-1).indices
    return (top == y_true.unsqueeze(-1)).any(dim=-1).float()
