"""Keras losses (classes with reductions, and function forms returning per-sample losses).

Function forms average over the last axis and return one value per sample; classes apply
``sample_weight`` and a reduction, Keras 3's: 'sum_over_batch_size' (default) or 'mean', 'sum',
'mean_with_sample_weight', 'none' or None (Keras 2's 'auto' raises, as in TensorFlow 2.21). More losses:
``losses_extra``.

Example:
    loss = md.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    value = loss(labels, logits)                       # scalar
"""

from __future__ import annotations

from multidev.keras._missing import missing_names
import torch
import torch.nn.functional as F

from multidev._core.eager_tensor import readable
from multidev.values import context
from multidev.keras import backend, step_inputs
from multidev.keras.loss_reduction import Reduction, reduce_weighted  # noqa: F401 (re-exported)
from multidev.keras.activations import take_logits
from multidev.keras.loss_results import program_result


def _as_tensor(x, like=None):
    if isinstance(x, torch.Tensor):
        return x
    t = torch.as_tensor(x)
    return t.to(like.device) if like is not None else t


def align_ranks(y_true, y_pred):
    """Keras's rule: when the ranks differ by one and the longer ends in 1, squeeze that axis (or, when
    the other is rank 1, expand the other)."""
    y_true, y_pred = _as_tensor(y_true, y_pred if isinstance(y_pred, torch.Tensor) else None), _as_tensor(y_pred)
    if y_pred.ndim == y_true.ndim + 1 and y_pred.shape[-1] == 1:
        return (y_true.unsqueeze(-1), y_pred) if y_true.ndim == 1 else (y_true, y_pred.squeeze(-1))
    if y_true.ndim == y_pred.ndim + 1 and y_true.shape[-1] == 1:
        return (y_true, y_pred.unsqueeze(-1)) if y_pred.ndim == 1 else (y_true.squeeze(-1), y_pred)
    return y_true, y_pred


def _float(y_true, y_pred):
    y_true, y_pred = align_ranks(y_true, y_pred)
    if not y_pred.is_floating_point():
        y_pred = y_pred.float()
    return y_true.to(y_pred.dtype), y_pred


def mean_squared_error(y_true, y_pred):
    """mean((y_pred - y_true)^2) over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    return torch.square(y_pred - y_true).mean(dim=-1)


def mean_absolute_error(y_true, y_pred):
    """mean(|y_pred - y_true|) over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    return torch.abs(y_pred - y_true).mean(dim=-1)


def huber(y_true, y_pred, delta=1.0):
    """Quadratic for |error| <= delta, linear beyond; mean over the last axis."""
    y_true, y_pred = _float(y_true, y_pred)
    return F.huber_loss(y_pred, y_true, reduction="none", delta=delta).mean(dim=-1)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Cross-entropy of independent 0/1 targets; probabilities are clipped to [eps, 1-eps].

    As in Keras, an output that keeps its logits (Keras's ``sigmoid``, or ``softmax``) is taken through
    them (``from_logits`` then holds), so a confidently wrong prediction keeps its gradient.
    """
    y_pred, from_logits = take_logits(y_pred, from_logits, "Sigmoid", "binary_crossentropy")
    y_true, y_pred = _float(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        loss = F.binary_cross_entropy_with_logits(y_pred, y_true, reduction="none")
    else:
        eps = backend.epsilon()
        p = y_pred.clamp(eps, 1.0 - eps)
        loss = -(y_true * torch.log(p + eps) + (1 - y_true) * torch.log(1 - p + eps))
    return loss.mean(dim=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Cross-entropy against one-hot (or soft) targets over ``axis``; a softmax output that keeps its
    logits is taken through them, as in Keras (a confidently wrong prediction keeps its gradient)."""
    y_pred, from_logits = take_logits(y_pred, from_logits, "Softmax", "categorical_crossentropy")
    y_true, y_pred = _float(y_true, y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"Arguments `target` and `output` must have the same shape. Received: "
                         f"target.shape={tuple(y_true.shape)}, output.shape={tuple(y_pred.shape)}. "
                         "For integer labels use sparse_categorical_crossentropy.")
    if label_smoothing:
        n = y_true.shape[axis]
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    if from_logits:
        logp = torch.log_softmax(y_pred, dim=axis)
    else:
        p = y_pred / y_pred.sum(dim=axis, keepdim=True)
        logp = torch.log(p.clamp(backend.epsilon(), 1.0 - backend.epsilon()))
    return -(y_true * logp).sum(dim=axis)


def check_label_range(labels, num_classes, what="sparse_categorical_crossentropy"):
    """Raise ValueError naming the first out-of-range label (checked on CPU tensors only)."""
    if labels.device.type != "cpu" or labels.numel() == 0:
        return
    lo, hi = torch.aminmax(labels)
    lo, hi = int(lo), int(hi)
    if lo < 0 or hi >= num_classes:
        bad = hi if hi >= num_classes else lo
        raise ValueError(f"Received a label value of {bad} which is outside the valid range of [0, {num_classes}) "
                         f"for {what}. Labels must be integers in 0..{num_classes - 1}; check the number of "
                         "units of the output layer or the labels.")


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1, ignore_class=None):
    """Cross-entropy against integer class ids (y_true shape = y_pred shape minus the class axis); a softmax
    output that keeps its logits is taken through them, as in Keras."""
    y_pred, from_logits = take_logits(y_pred, from_logits, "Softmax", "sparse_categorical_crossentropy")
    y_pred = _as_tensor(y_pred)
    labels = _as_tensor(y_true, y_pred)
    if labels.ndim == y_pred.ndim and labels.shape[-1] == 1:
        labels = labels.squeeze(-1)
    if labels.is_floating_point():
        labels = labels.long()
    labels = labels.long()
    if tuple(labels.shape) != tuple(y_pred.shape[:-1]):
        raise ValueError(f"Shape mismatch: the shape of labels (received {tuple(labels.shape)}) should equal the "
                         f"shape of logits except for the last dimension (received {tuple(y_pred.shape)}).")
    valid = None
    if ignore_class is not None:
        valid = labels != ignore_class
        labels = torch.where(valid, labels, torch.zeros_like(labels))
    check_label_range(labels, y_pred.shape[axis])
    if not y_pred.is_floating_point():
        y_pred = y_pred.float()
    if from_logits:
        logp = torch.log_softmax(y_pred, dim=axis)
    else:   # TF's: the clipped probabilities' logs through a softmax (so they need not sum to one)
        logp = torch.log_softmax(torch.log(y_pred.clamp(backend.epsilon(), 1.0 - backend.epsilon())), dim=axis)
    loss = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if valid is None:
        return loss
    loss = torch.where(valid, loss, torch.zeros_like(loss))
    loss._keras_mask = valid      # a mean reduction averages over the kept entries, as Keras 3's
    return loss


class Loss:
    """Base class: ``call(y_true, y_pred)`` gives per-sample losses; ``__call__`` weights and reduces."""

    def __init__(self, reduction="sum_over_batch_size", name=None):
        Reduction.validate(reduction)
        self.reduction = reduction
        self.name = name or backend.to_snake_case(type(self).__name__)

    def call(self, y_true, y_pred):
        raise NotImplementedError(f"{type(self).__name__} must implement `call(y_true, y_pred)` (the per-sample "
                                  "losses) or `__call__(y_true, y_pred, sample_weight=None)` (the reduced loss).")

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The reduced loss. Inside a Keras step on a strategy (a custom ``train_step``), a mean
        reduction divides by the step's global batch, as the compiled loss does, so the replicas'
        summed gradients equal one device's (Keras 3 on TensorFlow divides by the replica count)."""
        losses = self.call(y_true, y_pred)
        reduced = reduce_weighted(losses, sample_weight, self.reduction)
        if self.reduction in (Reduction.NONE, None, Reduction.SUM) or reduced.ndim > 0 or losses.ndim == 0:
            return readable(reduced)
        batch = int(losses.shape[0])
        share = step_inputs.replica_share(batch)
        if share is None:
            return readable(_scaled_for_distribution(reduced))
        reduced = readable(reduced * share)
        step_inputs.mark_share(reduced, batch)
        return reduced

    def get_config(self) -> dict:
        return {"reduction": self.reduction, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _scaled_for_distribution(loss):
    """A mean loss in a custom loop's replica function (``strategy.run``, no Keras step): divided by
    the replica count, as Keras 3's losses do under a TensorFlow strategy, so the replicas' summed
    gradients are the global mean's; ``loss.backward()`` is then told to sum, not average (as after
    ``md.nn.compute_average_loss``)."""
    env = context.replica_env()
    replicas = env.replica_context.num_replicas_in_sync if env is not None else 1
    if replicas <= 1:
        return loss
    context.mark_loss_scaled()
    return loss / replicas


class LossFunctionWrapper(Loss):
    """A Loss around a per-sample function and its keyword arguments."""

    def __init__(self, fn, reduction="sum_over_batch_size", name=None, **fn_kwargs):
        super().__init__(reduction=reduction, name=name)
        self.fn, self.fn_kwargs = fn, fn_kwargs

    def call(self, y_true, y_pred):
        return self.fn(y_true, y_pred, **self.fn_kwargs)

    def get_config(self):
        return {**super().get_config(), **self.fn_kwargs}


class MeanSquaredError(LossFunctionWrapper):
    """Mean of squared errors."""

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error"):
        super().__init__(mean_squared_error, reduction, name)


class MeanAbsoluteError(LossFunctionWrapper):
    """Mean of absolute errors."""

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error"):
        super().__init__(mean_absolute_error, reduction, name)


class Huber(LossFunctionWrapper):
    """Huber loss with threshold ``delta``."""

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss"):
        super().__init__(huber, reduction, name, delta=delta)


class BinaryCrossentropy(LossFunctionWrapper):
    """Binary cross-entropy (``from_logits`` for raw scores)."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="binary_crossentropy"):
        super().__init__(binary_crossentropy, reduction, name, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)


class CategoricalCrossentropy(LossFunctionWrapper):
    """Cross-entropy for one-hot labels."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction="sum_over_batch_size",
                 name="categorical_crossentropy"):
        super().__init__(categorical_crossentropy, reduction, name, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)


class SparseCategoricalCrossentropy(LossFunctionWrapper):
    """Cross-entropy for integer labels."""

    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size", axis=-1,
                 name="sparse_categorical_crossentropy"):
        super().__init__(sparse_categorical_crossentropy, reduction, name, from_logits=from_logits,
                         ignore_class=ignore_class, axis=axis)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error

_FUNCTIONS = {
    "mean_squared_error": mean_squared_error, "mse": mean_squared_error, "MSE": mean_squared_error,
    "mean_absolute_error": mean_absolute_error, "mae": mean_absolute_error, "MAE": mean_absolute_error,
    "binary_crossentropy": binary_crossentropy, "categorical_crossentropy": categorical_crossentropy,
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy, "huber": huber, "huber_loss": huber,
}
_CLASSES = {c.__name__: c for c in (MeanSquaredError, MeanAbsoluteError, Huber, BinaryCrossentropy,
                                    CategoricalCrossentropy, SparseCategoricalCrossentropy)}


def get(identifier):
    """Resolve a loss name ('mse', 'sparse_categorical_crossentropy', 'MeanSquaredError', ...), object or callable."""
    if identifier is None or isinstance(identifier, Loss) or callable(identifier) and not isinstance(identifier, type):
        return identifier
    functions, classes = _registries()
    if isinstance(identifier, dict):
        return classes[identifier["class_name"]].from_config(identifier.get("config", {}))
    if isinstance(identifier, str):
        if identifier in functions:
            return functions[identifier]
        if identifier in classes:
            return classes[identifier]()
    raise ValueError(f"Could not interpret loss identifier: {identifier!r}. Valid names: "
                     f"{sorted(set(functions) | set(classes))}, a Loss instance or a callable(y_true, y_pred).")


def _registries():
    """Names of this module's losses and ``losses_extra``'s (imported late: it builds on this module)."""
    from multidev.keras import losses_extra

    return {**_FUNCTIONS, **losses_extra.FUNCTIONS}, {**_CLASSES, **losses_extra.CLASSES}


def deserialize(config):
    """A loss from ``serialize``'s form (a name or ``{"class_name", "config"}``)."""
    return get(config)


def serialize(loss):
    """Config form of a loss (a name for functions, class_name/config for built-in classes)."""
    if isinstance(loss, str):
        return loss
    functions, classes = _registries()
    if isinstance(loss, Loss) and type(loss).__name__ in classes:
        config = loss.get_config()
        return {"class_name": type(loss).__name__, "config": config}
    for name, fn in functions.items():
        if fn is loss:
            return name
    return getattr(loss, "__name__", None)

# Called by a program (not through compile): results numpy reads, TF's error for shapes that do not broadcast.
mean_squared_error, mean_absolute_error, huber, binary_crossentropy, categorical_crossentropy = (
    program_result(f) for f in (mean_squared_error, mean_absolute_error, huber, binary_crossentropy,
                                categorical_crossentropy))
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error

_missing = missing_names(__name__, 'losses', globals())  # unknown names: does Keras 3 have them?


def __getattr__(name):
    """Keras 3's other losses live in ``losses_extra``; any other name: does Keras 3 have it?"""
    if not name.startswith("__"):
        from multidev.keras import losses_extra

        if hasattr(losses_extra, name) and not name.startswith("_"):
            return getattr(losses_extra, name)
    return _missing(name)
