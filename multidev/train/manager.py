"""``md.train.CheckpointManager``: numbered checkpoints in one directory, the oldest deleted.

It keeps at most ``max_to_keep`` checkpoints (None: all), except one every
``keep_checkpoint_every_n_hours``, which it stops managing and never deletes. The directory's
``checkpoint`` index lists the kept ones, so a new manager (a restarted job) continues the
sequence. With ``checkpoint_interval``, ``save`` does nothing until ``step_counter`` has advanced
that many steps since the last save. Under a multi-worker strategy only the chief writes files
and deletes old ones; every worker must still call ``save``.

Example:
    ckpt = md.train.Checkpoint(model=model, optimizer=optimizer)
    manager = md.train.CheckpointManager(ckpt, "/tmp/ckpts", max_to_keep=3)
    manager.restore_or_initialize()
    for epoch in range(10):
        train_one_epoch()
        manager.save()              # '/tmp/ckpts/ckpt-<n>'
"""

from __future__ import annotations

import collections
import numbers
import os
import time

from multidev._core import write_errors
from multidev.train import files, state_file
from multidev.train import options as ckpt_options
from multidev.train.checkpoint import Checkpoint, _is_chief, counted_save, workers_meet


class CheckpointManager:
    """Saves numbered checkpoints of ``checkpoint`` in ``directory`` and deletes old ones.

    Args:
        checkpoint: the ``md.train.Checkpoint`` to save and restore.
        directory: where checkpoints and the ``checkpoint`` index go.
        max_to_keep: how many recent checkpoints to keep (None: keep all).
        keep_checkpoint_every_n_hours: also keep one checkpoint per this many hours.
        checkpoint_name: file prefix of the checkpoints (``ckpt`` -> ``ckpt-1``).
        step_counter: a variable counting steps (needed with ``checkpoint_interval``).
        checkpoint_interval: minimum steps between two saves.
        init_fn: called by ``restore_or_initialize`` when there is no checkpoint.

    Example:
        >>> manager = md.train.CheckpointManager(ckpt, "/tmp/md_mgr_doc", max_to_keep=2)
        >>> manager.save(); manager.save(); manager.save()
        >>> [os.path.basename(p) for p in manager.checkpoints]
        ['ckpt-2', 'ckpt-3']
    """

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt", step_counter=None, checkpoint_interval=None, init_fn=None):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"CheckpointManager's `checkpoint` must be an md.train.Checkpoint, got "
                            f"{checkpoint!r} of type {type(checkpoint).__name__}.")
        if not isinstance(directory, (str, os.PathLike)):   # TensorFlow: a TypeError from os.path
            raise TypeError(f"CheckpointManager's `directory` must be a path (str or os.PathLike), got {directory!r} "
                            f"of type {type(directory).__name__}.")
        if not os.fspath(directory):
            raise ValueError(f"CheckpointManager's `directory` must be a non-empty path, got {directory!r}.")
        if max_to_keep is not None and (isinstance(max_to_keep, bool) or not isinstance(max_to_keep, numbers.Integral)):
            raise TypeError(f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep!r} of type "
                            f"{type(max_to_keep).__name__}.")
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep!r}.")
        max_to_keep = None if max_to_keep is None else int(max_to_keep)   # numpy integers too
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if `checkpoint_interval` is not None "
                             f"(got checkpoint_interval={checkpoint_interval!r}).")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._keep_every_n_hours = keep_checkpoint_every_n_hours
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        self._init_fn = init_fn
        self._last_checkpoint_step = None
        self._recover_state()

    def _recover_state(self) -> None:
        """Continue the sequence recorded in the directory's ``checkpoint`` index."""
        with write_errors.writing(self._directory, "read the checkpoint index of the directory",
                                  "Pass the directory that holds (or will hold) the checkpoints."):
            state = state_file.get_checkpoint_state(self._directory)
        now = time.time()
        self._maybe_delete: collections.OrderedDict = collections.OrderedDict()
        if state is None:
            self._latest_checkpoint, self._last_preserved_timestamp = None, now
            return
        self._latest_checkpoint = state.model_checkpoint_path or None
        self._last_preserved_timestamp = min(state.last_preserved_timestamp or now, now)
        stamps = state.all_model_checkpoint_timestamps
        if len(stamps) != len(state.all_model_checkpoint_paths):
            stamps = [self._last_preserved_timestamp] * len(state.all_model_checkpoint_paths)
        for path, stamp in zip(state.all_model_checkpoint_paths, stamps):
            self._maybe_delete[path] = min(stamp, now)

    # ----- properties ---------------------------------------------------------------------------
    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        return self._checkpoint

    @property
    def checkpoint_interval(self):
        return self._checkpoint_interval

    @property
    def latest_checkpoint(self) -> str | None:
        """The prefix of the newest checkpoint (None before the first save in an empty directory)."""
        return self._latest_checkpoint

    @property
    def checkpoints(self) -> list[str]:
        """The managed checkpoints, oldest first (preserved hourly ones are no longer listed)."""
        return list(self._maybe_delete)

    # ----- saving -------------------------------------------------------------------------------
    def save(self, checkpoint_number=None, check_interval=True, options=None) -> str | None:
        """Save a numbered checkpoint and delete the ones past ``max_to_keep``; returns its path,
        or None when ``checkpoint_interval`` steps have not passed since the last save.

        Args:
            checkpoint_number: number for the file name (default: the checkpoint's ``save_counter``).
            check_interval: False saves even within ``checkpoint_interval``.
            options: ``md.train.CheckpointOptions`` (its write callbacks run after the save).
        """
        ckpt_options.check(options)
        if self._checkpoint_interval is not None:
            step = int(self._step_counter)
            if self._last_checkpoint_step is not None:
                if step == self._last_checkpoint_step:
                    return None
                if check_interval and step < self._last_checkpoint_step + self._checkpoint_interval:
                    return None
        counter = self._checkpoint.save_counter
        with counted_save(counter):   # a failed write changes nothing: counter, interval, the kept list
            number = int(counter) if checkpoint_number is None else int(checkpoint_number)
            path = self._checkpoint._write_files(f"{self._prefix}-{number}")
        if self._checkpoint_interval is not None:
            self._last_checkpoint_step = step
        self._maybe_delete.pop(path, None)       # re-saved: move to the end of the queue
        self._maybe_delete[path] = time.time()
        self._latest_checkpoint = path
        chief = _is_chief(self._checkpoint)
        if chief:
            self._record_state()             # the new one is listed before anything is deleted
        self._sweep(delete=chief)
        if chief:
            self._record_state()
        workers_meet(self._checkpoint)
        ckpt_options.after_write(options, path)
        return path

    def _sweep(self, delete: bool) -> None:
        if self._max_to_keep is None:
            return
        while len(self._maybe_delete) > self._max_to_keep:
            path, stamp = self._maybe_delete.popitem(last=False)
            if (self._keep_every_n_hours is not None
                    and stamp - self._keep_every_n_hours * 3600.0 >= self._last_preserved_timestamp):
                self._last_preserved_timestamp = stamp
                continue
            if delete:
                files.remove(path)

    def _record_state(self) -> None:
        state_file.update_checkpoint_state(
            self._directory, self._latest_checkpoint, list(self._maybe_delete),
            all_model_checkpoint_timestamps=list(self._maybe_delete.values()),
            last_preserved_timestamp=self._last_preserved_timestamp)

    # ----- restoring ----------------------------------------------------------------------------
    def restore_or_initialize(self) -> str | None:
        """Restore the latest checkpoint and return its path; without one call ``init_fn`` (if any)
        and return None."""
        if self._latest_checkpoint is not None:
            self._checkpoint.restore(self._latest_checkpoint)
            if self._checkpoint_interval is not None:
                self._last_checkpoint_step = int(self._step_counter)
            return self._latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None
