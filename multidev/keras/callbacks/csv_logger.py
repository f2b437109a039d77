"""CSVLogger: one CSV row of epoch logs per epoch.

Example:
    CSVLogger("training.csv", append=True)
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable

from multidev.keras.callbacks import _worker_paths
from multidev.keras.callbacks.base import Callback


class CSVLogger(Callback):
    """Writes 'epoch' and the sorted log keys as columns to ``filename``.

    Under a multi-worker strategy only the chief writes ``filename``; other workers write to a
    ``workertemp_<worker>`` directory beside it, deleted when training ends.
    """

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename, self.sep, self.append = os.fspath(filename), separator, append
        self._file = self._writer = self._keys = None

    def on_train_begin(self, logs=None):
        self._path = _worker_paths.write_filepath(self.model, self.filename)
        exists = self.append and os.path.exists(self._path) and os.path.getsize(self._path) > 0
        os.makedirs(os.path.dirname(self._path) or ".", exist_ok=True)
        self._file = open(self._path, "a" if self.append else "w", newline="")
        self._keys = None
        self._header_written = exists

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self._keys is None:
            self._keys = sorted(logs)
            if self._keys and not any(k.startswith("val_") for k in self._keys):
                # Keras: validation's columns from the start (NA until there is one: validation_freq > 1, none)
                self._keys += [f"val_{k}" for k in self._keys]
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch"] + self._keys, delimiter=self.sep)
            if not self._header_written:
                self._writer.writeheader()
        self._writer.writerow({"epoch": epoch, **{k: _cell(logs.get(k, "NA")) for k in self._keys}})
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None
            _worker_paths.remove_temp_dirpath(self.model, os.path.dirname(self._path))


def _cell(value):
    """Keras's cell for a log value: a list-valued metric (Recall at several thresholds) as "[a, b]"."""
    if isinstance(value, str) or not isinstance(value, Iterable) or getattr(value, "ndim", None) == 0:
        return value
    return f"\"[{', '.join(map(str, value))}]\""
