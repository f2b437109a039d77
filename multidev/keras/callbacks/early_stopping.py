"""EarlyStopping: stop when the monitored quantity stops improving.

Example:
    EarlyStopping(monitor="val_loss", patience=3, min_delta=1e-3, restore_best_weights=True)
"""

from __future__ import annotations

from multidev.keras.callbacks.base import Callback
from multidev.keras.callbacks.monitor import get_monitor_value, is_improvement, resolve_mode, settle_mode


class EarlyStopping(Callback):
    """Stops after ``patience`` epochs without an improvement larger than ``min_delta``.

    With ``restore_best_weights`` the weights of the best epoch are restored when training ends, stopped
    early or not (tf.keras 2.21's and Keras 3's rule: imbalanced_data's ``EarlyStopping(monitor='val_prc',
    patience=10, restore_best_weights=True)`` over fewer epochs than the patience kept the last epoch's).
    """

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor, self.min_delta, self.patience, self.verbose = monitor, abs(min_delta), patience, verbose
        self.baseline, self.restore_best_weights, self.start_from_epoch = baseline, restore_best_weights, start_from_epoch
        self.mode = resolve_mode(mode, monitor, "EarlyStopping")
        self._auto = mode not in ("min", "max")   # auto, or an unknown mode (auto with a warning)

    def on_train_begin(self, logs=None):
        self.wait, self.stopped_epoch, self.best_epoch = 0, 0, 0
        self.best, self.best_weights = None, None

    def on_epoch_end(self, epoch, logs=None):
        if self._auto:
            self.mode, self._auto = settle_mode("auto", self.monitor, self.model, "EarlyStopping"), False
        current = get_monitor_value(logs, self.monitor, "Early stopping")
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:   # no progress ever: the first epoch's
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if is_improvement(current, self.best, self.mode, self.min_delta):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or is_improvement(current, self.baseline, self.mode, self.min_delta):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)
