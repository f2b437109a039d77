"""``md.keras.utils.SidecarEvaluator``: evaluate each new checkpoint the chief writes (an ``evaluator`` task).

In parameter-server training the evaluator stays outside the cluster: it watches ``checkpoint_dir``
for weights files (``*.weights.h5`` or ``*.safetensors``, or TF-format checkpoints ``<prefix>.index``, e.g. written by ``ModelCheckpoint(..., save_weights_only=True)``),
loads each new one, oldest first, into ``model`` and runs ``model.evaluate(data, steps=steps)``.
It stops after ``max_evaluations`` evaluations or when no new file appears for ``timeout`` seconds.

Example:
    model = build_model(); model.compile(loss="mse", metrics=["mae"])
    md.keras.utils.SidecarEvaluator(model, (x_val, y_val), "/tmp/ckpt", max_evaluations=5).start()
"""

from __future__ import annotations

import os
import time
from typing import Any

_SUFFIXES = (".weights.h5", ".safetensors")   # what save_weights accepts
_INDEX = ".index"                              # a TensorFlow-format checkpoint (save_weights("ckpt"))


class SidecarEvaluator:
    """Evaluates ``model`` on ``data`` with every new weights file in ``checkpoint_dir``.

    Args:
        model: a compiled Keras model of the architecture that wrote the weights.
        data: what ``model.evaluate`` takes: a dataset, or an ``(x, y)`` tuple.
        checkpoint_dir: the directory the chief writes weights files to.
        steps: evaluation steps per checkpoint (None: the whole ``data``).
        max_evaluations: stop after this many evaluations (None: until ``timeout``).
        timeout: seconds to wait for a new file before stopping (bounded by default: 600).
        poll_interval: seconds between looks at the directory.
    """

    def __init__(self, model: Any, data: Any, checkpoint_dir: str, steps: int | None = None,
                 max_evaluations: int | None = None, callbacks: Any = None, timeout: float = 600.0,
                 poll_interval: float = 1.0):
        if max_evaluations is not None and max_evaluations < 1:
            raise ValueError(f"max_evaluations must be a positive integer or None; got {max_evaluations!r}.")
        self.model, self.data, self.steps = model, data, steps
        self.checkpoint_dir = os.fspath(checkpoint_dir)
        self.max_evaluations, self.callbacks = max_evaluations, callbacks
        self.timeout, self.poll_interval = float(timeout), float(poll_interval)
        self.results: list[tuple[str, dict]] = []

    def _new_files(self, seen: set[str]) -> list[str]:
        """New weights files, and new TensorFlow-format checkpoints by prefix (``ckpt-1`` for ``ckpt-1.index``:
        what ``ModelCheckpoint('ckpt-{epoch}', save_weights_only=True)`` writes, as the evaluator migration
        guide does; their ``.data`` file is part of the checkpoint, not a weights file of its own)."""
        if not os.path.isdir(self.checkpoint_dir):
            return []
        names = [n for n in os.listdir(self.checkpoint_dir) if not n.startswith(".tmp_")]
        prefixes = {n[:-len(_INDEX)] for n in names if n.endswith(_INDEX)}
        paths = [os.path.join(self.checkpoint_dir, p) for p in prefixes]
        paths += [os.path.join(self.checkpoint_dir, n) for n in names
                  if n.endswith(_SUFFIXES) and n.split(".data", 1)[0] not in prefixes]
        mtime = lambda p: os.path.getmtime(p + _INDEX if os.path.basename(p) in prefixes else p)  # noqa: E731
        return sorted((p for p in paths if p not in seen), key=mtime)

    def _evaluate(self, path: str) -> dict:
        self.model.load_weights(path)
        args = self.data if isinstance(self.data, tuple) else (self.data,)  # (x, y[, sample_weight]) or a dataset
        logs = self.model.evaluate(*args, steps=self.steps, callbacks=self.callbacks, verbose=0, return_dict=True)
        print(f"SidecarEvaluator: {os.path.basename(path)}: "
              + ", ".join(f"{k}={v:.4f}" for k, v in logs.items()), flush=True)
        return logs

    def start(self) -> list[tuple[str, dict]]:
        """Evaluate checkpoints as they appear; returns ``[(path, logs)]`` in evaluation order."""
        seen: set[str] = set()
        last_new = time.monotonic()
        while self.max_evaluations is None or len(self.results) < self.max_evaluations:
            fresh = self._new_files(seen)
            if not fresh:
                if time.monotonic() - last_new > self.timeout:
                    break
                time.sleep(self.poll_interval)
                continue
            last_new = time.monotonic()
            for path in fresh:
                seen.add(path)
                self.results.append((path, self._evaluate(path)))
                if self.max_evaluations is not None and len(self.results) >= self.max_evaluations:
                    break
        return self.results


__all__ = ["SidecarEvaluator"]
