"""BackupAndRestore: resume an interrupted ``fit`` exactly where the last backup left it.

A backup holds the weights, the optimizer state (with ``iterations``), the epoch and the step
within it, the input position (the RNG state the epoch's input pass started from, so the same
shuffle, and how many batches of it were taken) and every worker's torch RNG state at the backup
(dropout masks etc.). It is written at each epoch end (``save_freq="epoch"``) or every
``save_freq`` batches. The next ``fit`` with the callback restores it and continues: mid-epoch,
it replays the epoch's input and skips the batches already trained, without training on them.
After a successful ``fit`` the directory is deleted (``delete_checkpoint``).

Under ``MultiWorkerMirroredStrategy`` every worker takes part in each backup (the RNG states
are gathered) and only the chief writes it; every worker reads it on restore, so
``backup_dir`` must be on a filesystem all workers share (workers that disagree raise). Layout
and atomic commit: see ``_backup_files``.

Example:
    model.fit(x, y, epochs=10, callbacks=[BackupAndRestore(backup_dir="/tmp/backup", save_freq=100)])
"""

from __future__ import annotations

import os

import torch

from multidev._core import atomic_files
from multidev._core.errors import FailedPreconditionError
from multidev.keras.callbacks import _backup_files as files
from multidev.keras.callbacks._worker_paths import is_chief
from multidev.keras.callbacks.base import Callback
from multidev.keras.models.data_adapter import known_length
from multidev.keras.models.resume import ResumePoint
from multidev.keras.saving import weights_io


class BackupAndRestore(Callback):
    """Backs up the whole training state; restores it at the start of the next ``fit``.

    Args:
        backup_dir: directory for the backup (shared by all workers of a multi-worker job).
        save_freq: ``"epoch"`` (back up at each epoch end) or a positive int (every N batches).
        delete_checkpoint: delete ``backup_dir`` when ``fit`` completes.
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True):
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed; pass a directory path for the backups.")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq <= 0):
            raise ValueError(f"Unrecognized save_freq: {save_freq!r}. Expected save_freq are 'epoch' or a positive "
                             "integer (back up every N batches).")
        self.backup_dir, self.save_freq, self.delete_checkpoint = os.fspath(backup_dir), save_freq, delete_checkpoint
        self._epoch = 0
        self._batches = 0

    # ----- restore ---------------------------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self._batches = 0
        state = files.read_state(self.backup_dir)
        self._check_workers_agree(state)
        if state is None:
            return
        has_optimizer = self.model.optimizer is not None
        blobs = files.read_files(state, self.backup_dir, needs_optimizer=has_optimizer)
        rng_rows = None if blobs["rng"] is None else int(blobs["rng"]["workers"].shape[0])
        files.check_against_run(self.backup_dir, state, self._run(), rng_rows)
        variables = weights_io.variable_dict(self.model)
        weights_io.check_and_assign(variables, blobs["weights"], os.path.join(state["dir"], "weights.safetensors"))
        if blobs["optimizer"] is not None and has_optimizer:
            self.model.optimizer.load_state_tensors(blobs["optimizer"], variables)
        self.model._resume_point = self._resume_point(state, blobs["rng"])

    def _run(self) -> dict:
        """What this fit is: epochs, steps per epoch, batches per pass over its input, batch size (None: unknown)."""
        train = getattr(self.model, "_train_iterator", None)
        adapter = getattr(train, "adapter", None)
        batch_size = getattr(adapter, "batch_size", None)
        return {"epochs": self.params.get("epochs"), "steps_per_epoch": self.params.get("steps"),
                "pass_length": None if adapter is None else known_length(adapter),
                "batch_size": batch_size if isinstance(batch_size, int) else None}

    def _resume_point(self, state, rng) -> ResumePoint:
        extended = self.model.distribute_strategy.extended
        pass_rng = worker_rng = None
        if rng is not None:
            pass_rng = rng["pass"]
            rows = rng["workers"]
            same_layout = rows.shape[0] == extended.num_workers
            worker_rng = rows[extended.worker_index if same_layout else 0].clone()
        return ResumePoint(epoch=int(state["resume_epoch"]), step=int(state["resume_step"]), pass_rng=pass_rng,
                           pass_taken=int(state["pass_taken"]), rng=worker_rng)

    def _check_workers_agree(self, state) -> None:
        """Every worker must see the same backup (else their weights would silently differ)."""
        extended = self.model.distribute_strategy.extended
        if extended.num_workers == 1:
            return
        mine = [0, -1, -1] if state is None else [1, int(state["resume_epoch"]), int(state["resume_step"])]
        rows = extended.worker_collective.gather(torch.tensor([mine], dtype=torch.int64), 0).tolist()
        if any(row != rows[0] for row in rows):
            seen = "; ".join(f"worker {i}: " + ("no backup" if r[0] == 0 else f"epoch {r[1]} step {r[2]}")
                             for i, r in enumerate(rows))
            raise FailedPreconditionError(
                f"Workers see different backups in backup_dir={self.backup_dir!r} ({seen}). Put backup_dir on a "
                "filesystem that every worker shares, or delete it everywhere to start from scratch.")

    # ----- back up ---------------------------------------------------------------------------------
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._backup(resume_epoch=self._epoch, resume_step=batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._backup(resume_epoch=epoch + 1, resume_step=0)

    def _backup(self, resume_epoch: int, resume_step: int) -> None:
        """Every worker serializes and joins the RNG gather; the chief commits the files."""
        model, extended = self.model, self.model.distribute_strategy.extended
        variables = weights_io.variable_dict(model)
        blobs = {"weights": weights_io.to_bytes(variables, {"format": weights_io.FORMAT})}
        if model.optimizer is not None:
            names = {id(v): k for k, v in variables.items()}
            blobs["optimizer"] = weights_io.to_bytes(model.optimizer.state_tensors(names), {})
        workers_rng = extended.worker_collective.gather(torch.get_rng_state().unsqueeze(0), 0)
        train = model._train_iterator
        pass_rng = train.pass_rng if train is not None and train.pass_rng is not None else torch.get_rng_state()
        blobs["rng"] = weights_io.to_bytes({"pass": pass_rng, "workers": workers_rng}, {})
        if not is_chief(model):
            return
        files.write(self.backup_dir, blobs, {
            "resume_epoch": resume_epoch, "resume_step": resume_step,
            "pass_taken": train.pass_taken if train is not None else 0, "workers": extended.num_workers,
            "run": self._run()})

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and is_chief(self.model) and os.path.isdir(self.backup_dir):
            atomic_files.remove_tree(self.backup_dir)   # whole or gone, never half a backup
