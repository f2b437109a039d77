"""Workers of one job agree on how many batches each pass of ``fit``/``evaluate``/``predict`` has.

Every training step is a collective, so a worker whose input runs out first would leave ``fit``
with a model trained on fewer steps (exit 0) while the others fail waiting for it. Instead:

* at the start of each input pass the workers exchange its length; equal known lengths need
  nothing more, different ones fail on every worker at once, naming each worker's count;
* with a length unknown on some worker (a filtered or generated dataset), the workers agree
  each step whether all of them have a batch: all end the epoch together, or all raise naming
  the workers that ran out.

Example (what a worker sees when the others have more data)::

    InvalidArgumentError: Workers' training inputs differ in length: worker 0 has 20, worker 1
    has 10 batches per pass. ...
"""

from __future__ import annotations

import torch

from multidev._core.errors import InvalidArgumentError

_HINT = ("With several workers every worker must yield the same number of batches per epoch: give "
         "each worker the same amount of data (or let the strategy shard one dataset), or repeat() "
         "the input and set steps_per_epoch.")


class WorkerInputCheck:
    """Keeps the workers' epochs in step (see the module docstring); one per ``fit``."""

    def __init__(self, extended, what: str = "training"):
        self._extended = extended
        self._what = what
        self._workers = extended.num_workers
        self._index = extended.worker_index
        self._per_step = True

    def begin_pass(self, length: int | None) -> None:
        """Exchange this pass's length (None: unknown); raise on every worker if known lengths differ."""
        mine = torch.zeros(self._workers, dtype=torch.int64)
        mine[self._index] = -1 if length is None else length + 1  # 0 stays "not reported"
        lengths = [int(v) - 1 if v > 0 else None for v in self._extended.worker_collective.sum(mine).tolist()]
        known = [n for n in lengths if n is not None]
        if len(known) == len(lengths) and len(set(known)) > 1:
            counts = ", ".join(f"worker {i} has {n}" for i, n in enumerate(lengths))
            raise InvalidArgumentError(f"Workers' {self._what} inputs differ in length: {counts} batches per pass. {_HINT}")
        self._per_step = len(known) < len(lengths)

    def agree(self, has_batch: bool, taken: int) -> bool:
        """Whether every worker has a next batch (False: none has); raise if only some have."""
        if not self._per_step:
            return has_batch
        flags = torch.zeros(self._workers, dtype=torch.int64)
        flags[self._index] = int(has_batch)
        flags = self._extended.worker_collective.sum(flags).tolist()
        if all(flags):
            return True
        if not any(flags):
            return False
        done = [i for i, f in enumerate(flags) if not f]
        busy = [i for i, f in enumerate(flags) if f]
        raise InvalidArgumentError(
            f"Worker(s) {done} ran out of {self._what} data after {taken} batches of this pass while worker(s) "
            f"{busy} still have batches; every worker stops here rather than train on fewer steps. {_HINT}"
        )


def worker_input_check(model, what: str = "training") -> WorkerInputCheck | None:
    """A ``WorkerInputCheck`` when ``model`` runs on several workers, else None."""
    extended = model.distribute_strategy.extended
    return WorkerInputCheck(extended, what) if extended.num_workers > 1 else None
