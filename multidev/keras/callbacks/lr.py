"""Learning-rate callbacks: LearningRateScheduler and ReduceLROnPlateau.

Both log the rate of each epoch as ``learning_rate`` (Keras 3's key; Keras 2 wrote ``lr``).

Example:
    LearningRateScheduler(lambda epoch, lr: lr if epoch < 10 else lr * 0.9)
    ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=5, min_lr=1e-5)
"""

from __future__ import annotations

import inspect

from multidev._core.user_warnings import warn_user
from multidev.keras.callbacks.base import Callback
from multidev.keras.callbacks.monitor import is_improvement, resolve_mode, settle_mode


def _rate(optimizer) -> float:
    """The optimizer's current learning rate as a Python float (its variable's value)."""
    return float(optimizer.learning_rate)


class LearningRateScheduler(Callback):
    """Sets the learning rate at each epoch start to ``schedule(epoch, lr)`` (or ``schedule(epoch)``)."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose
        try:
            self._two_args = len(inspect.signature(schedule).parameters) >= 2
        except (TypeError, ValueError):
            self._two_args = True

    def on_epoch_begin(self, epoch, logs=None):
        opt = self.model.optimizer
        lr = self.schedule(epoch, _rate(opt)) if self._two_args else self.schedule(epoch)
        try:
            lr = float(lr)
        except (TypeError, ValueError) as err:
            raise ValueError(f'The output of the "schedule" function should be a float. Got: {lr!r}') from err
        opt.learning_rate = lr
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {lr}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _rate(self.model.optimizer)


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by ``factor`` after ``patience`` epochs without improvement."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto", min_delta=1e-4,
                 cooldown=0, min_lr=0.0, **kwargs):
        super().__init__()
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}")
        self.monitor, self.factor, self.patience, self.verbose = monitor, factor, patience, verbose
        self.min_delta, self.cooldown, self.min_lr = min_delta, cooldown, min_lr
        self.mode = resolve_mode(mode, monitor, "ReduceLROnPlateau")
        self._auto = mode not in ("min", "max")   # auto, or an unknown mode (auto with a warning)
        self._reset()

    def _reset(self):
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def on_train_begin(self, logs=None):
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        if self._auto:
            self.mode, self._auto = settle_mode("auto", self.monitor, self.model, "ReduceLROnPlateau"), False
        opt = self.model.optimizer
        logs["learning_rate"] = old_lr = _rate(opt)
        current = logs.get(self.monitor)
        if current is None:
            warn_user(f"Learning rate reduction is conditioned on metric `{self.monitor}` which is not available. "
                      f"Available metrics are: {','.join(logs)}.")     # Keras 3's words, the logs' order
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if is_improvement(float(current), self.best, self.mode, self.min_delta):
            self.best, self.wait = float(current), 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience and old_lr > self.min_lr:
                new_lr = max(old_lr * self.factor, self.min_lr)
                opt.learning_rate = new_lr
                if self.verbose:
                    print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
                self.cooldown_counter, self.wait = self.cooldown, 0
