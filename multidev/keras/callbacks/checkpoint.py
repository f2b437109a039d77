"""ModelCheckpoint: save the model or its weights every epoch (or N batches), optionally only the best.

Example:
    ModelCheckpoint("ckpt/weights.{epoch:02d}-{val_loss:.2f}.weights.h5", save_weights_only=True,
                    save_best_only=True, monitor="val_loss")
"""

from __future__ import annotations

import os

from multidev.keras.callbacks import _worker_paths
from multidev.keras.callbacks.base import Callback
from multidev.keras.callbacks.monitor import get_monitor_value, is_improvement, resolve_mode, settle_mode
from multidev.keras.saving import weights_io


class ModelCheckpoint(Callback):
    """Saves to ``filepath`` formatted with ``epoch`` (1-based) and the epoch's logs.

    Weights go through ``save_weights``: with ``save_weights_only=True`` the path must end in
    ``.weights.h5`` (Keras 3) or ``.safetensors`` and is written exactly as formatted (safetensors
    content), or have no suffix (``"ckpt_{epoch}"``: an ``md.train`` checkpoint at that prefix, listed
    in the directory's ``checkpoint`` file for ``md.train.latest_checkpoint``, as Keras 2 wrote); whole models go through ``model.save`` (``.keras`` archive or a directory). Under a multi-worker strategy every worker saves (saving
    may involve collectives) but only the chief writes ``filepath``; the others write to a
    ``workertemp_<worker>`` directory beside it and delete it at once, as TensorFlow does.
    """

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", initial_value_threshold=None, **kwargs):
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(f"Unrecognized save_freq: {save_freq!r}. Expected 'epoch' or a positive integer.")
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        if save_weights_only and not (self.filepath.endswith(weights_io.VALID_SUFFIXES)
                                      or weights_io.is_checkpoint_prefix(self.filepath)):
            raise ValueError(
                "When using `save_weights_only=True` in `ModelCheckpoint`, the filepath provided must end in "
                "`.weights.h5` (Keras 3) or `.safetensors`, or have no suffix at all (a checkpoint prefix, as "
                f"Keras 2 wrote: 'ckpt_{{epoch}}'). Received: filepath={self.filepath!r}. "
                f"Pass e.g. {self.filepath + '.weights.h5'!r}."
            )
        self.save_best_only, self.save_weights_only, self.save_freq = save_best_only, save_weights_only, save_freq
        self.mode = resolve_mode(mode, monitor, "ModelCheckpoint")
        self._auto = mode not in ("min", "max")   # auto, or an unknown mode (auto with a warning)
        self.best = initial_value_threshold
        self._batches = 0
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if isinstance(self.save_freq, int):
            self._batches += 1
            if self._batches % self.save_freq == 0:
                self._save(self._epoch, {k: float(v) for k, v in (logs or {}).items()}, batch)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, logs or {})

    def _save(self, epoch, logs, batch=None):
        try:
            path = self.filepath.format(epoch=epoch + 1, batch=(batch or 0) + 1, **logs)
        except KeyError as err:
            raise KeyError(f"Failed to format this callback filepath: {self.filepath!r}. Reason: missing key {err} "
                           f"in the logs; available keys: {sorted(logs)}") from err
        verbose = self.verbose and _worker_paths.is_chief(self.model)
        if self.save_best_only:
            if self._auto:
                self.mode, self._auto = settle_mode("auto", self.monitor, self.model, "ModelCheckpoint"), False
            current = get_monitor_value(logs, self.monitor, "ModelCheckpoint")
            if current is None:
                return
            if not is_improvement(current, self.best, self.mode):
                if verbose:
                    print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {self.best:.5f}")
                return
            if verbose:
                previous = ("-inf" if self.mode == "max" else "inf") if self.best is None else f"{self.best:.5f}"
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {previous} to {current:.5f}, saving model to {path}")
            self.best = current
        elif verbose:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")
        self._write(path)

    def _write(self, path):
        """Save to ``path`` on the chief; elsewhere to a temporary copy, deleted right away."""
        target = _worker_paths.write_filepath(self.model, path)
        if self.save_weights_only:
            self.model.save_weights(target)
        else:
            self.model.save(target)
        _worker_paths.remove_temp_dirpath(self.model, os.path.dirname(target))
