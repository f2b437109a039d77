"""Where an interrupted ``fit`` resumes: epoch, step in the epoch, input position and RNG state.

``BackupAndRestore`` reads a backup into a ``ResumePoint`` and hands it to the model
(``model._resume_point``); ``fit`` applies it once, after ``on_train_begin``: it replays the
interrupted pass of the input from its starting RNG state (so the same shuffle), skips the
batches already trained, and restores the RNG state of the backup step (dropout masks etc.).
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Resume in ``epoch`` after its first ``step`` batches.

    ``pass_rng``/``pass_taken``: the RNG state at the start of the current input pass and the
    batches taken from that pass (None/0 when the epoch starts a fresh pass); ``rng``: torch's
    global RNG state at the backup (None: leave the generator alone).
    """

    epoch: int
    step: int = 0
    pass_rng: torch.Tensor | None = None
    pass_taken: int = 0
    rng: torch.Tensor | None = None

    def apply(self, train, initial_epoch: int) -> tuple[int, int]:
        """Position ``train`` (an ``EpochIterator``); returns ``(first epoch, first step)`` to run."""
        if self.epoch < initial_epoch:
            return initial_epoch, 0
        continues_pass = self.step > 0 or train.steps_arg is not None
        if continues_pass and self.pass_rng is not None:
            train.restore(self.pass_rng, self.pass_taken)
        if self.rng is not None:
            torch.set_rng_state(self.rng)
        return self.epoch, self.step


def worker_rng_sync(model):
    """``fn(state) -> chief's state`` when ``model`` trains on several workers, else None."""
    extended = model.distribute_strategy.extended
    if extended.num_workers == 1:
        return None
    return extended.worker_collective.broadcast
