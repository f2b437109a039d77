"""EpochIterator: the batches of each epoch (``steps_per_epoch``), and class weighting of batches.

It also knows its input position, so ``BackupAndRestore`` can resume mid-epoch: a *pass* is one
iterator over the adapter; ``pass_rng`` is torch's global RNG state right before the pass began
(its shuffle is drawn from it) and ``pass_taken`` the batches taken from it since. Restoring
replays the pass from that RNG state and skips ``pass_taken`` batches without training on them.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import warnings

import torch

from multidev.keras.models import data_adapter as da
from multidev.values.distributed import PerReplica


class EpochIterator:
    """Yields ``(step, batch)`` per epoch. Without ``steps`` each epoch is one pass; with it, one
    iterator continues across epochs (arrays restart; a dataset that runs out ends training), but
    where ``steps`` is one pass's length each epoch starts a new pass (as tf.keras 2 recreates it).

    ``sync_rng`` (optional, ``fn(state) -> state``) makes every worker of a job start each pass
    from the same RNG state (the chief's), so all workers shuffle alike and see the same global
    batches. ``worker_check`` (optional) makes the workers end each pass together or all fail.
    ``fresh_passes``: every epoch starts a new pass, ``steps`` or not (validation data: tf.keras 2's
    evaluate iterates its dataset anew on every call, so each validation reads the same first batches).
    """

    def __init__(self, adapter, steps=None, sync_rng=None, worker_check=None, fresh_passes=False):
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps <= 0):
            raise ValueError(f"`steps_per_epoch`/`steps` must be a positive integer or None. Received: {steps!r}")
        steps = None if steps is None else int(steps)   # numpy integers too
        if steps is None and adapter.infinite:
            raise ValueError("When providing an infinite dataset, you must specify the number of steps to run: "
                             "steps_per_epoch= for fit (validation_steps= for its validation data), steps= for "
                             "evaluate and predict. Received: steps=None (if you did not intend to create an "
                             "infinite dataset, make sure to not call `repeat()` on the dataset).")
        self.adapter = adapter
        self.steps_arg = steps
        self.steps = steps if steps is not None else da.known_length(adapter)
        self.exhausted = False
        self._iterator = None
        self._sync_rng = sync_rng
        self._worker_check = worker_check  # ``worker_input.WorkerInputCheck``: workers end passes together
        self._fresh_passes = fresh_passes
        self.pass_rng: torch.Tensor | None = None
        self.pass_taken = 0

    def enumerate_epoch(self, first_step=0):
        """``(step, batch)`` pairs of one epoch, numbered from ``first_step`` (a resumed epoch)."""
        if self.steps_arg is None:
            if self._iterator is None or first_step == 0:
                self._begin_pass()
            while True:
                batch = self._take()
                if batch is None:
                    break
                yield first_step, batch
                first_step += 1
            self._iterator = None
            return
        if first_step == 0 and (self._fresh_passes or self.steps_arg == da.known_length(self.adapter)):
            self._iterator = None   # tf.keras: where one pass is `steps` batches, every epoch is a fresh pass
        for step in range(first_step, self.steps_arg):
            batch = self._next()
            if batch is None:
                return
            yield step, batch

    def restore(self, pass_rng: torch.Tensor, pass_taken: int) -> None:
        """Replay the pass that began at RNG state ``pass_rng``, skipping its first ``pass_taken``
        batches (fetched, not trained on); the next epoch continues after them."""
        torch.set_rng_state(pass_rng)
        self.pass_rng, self._iterator, self.pass_taken = pass_rng.clone(), iter(self.adapter), 0
        for _ in range(pass_taken):
            if self._take() is None:
                raise ValueError(f"Cannot resume: the input yields fewer than the {pass_taken} batches already "
                                 "trained in this pass. Pass the same data to fit() when resuming a backup.")

    def _begin_pass(self) -> None:
        if self._sync_rng is not None:
            torch.set_rng_state(self._sync_rng(torch.get_rng_state()))
        self.pass_rng = torch.get_rng_state()
        self._iterator = iter(self.adapter)
        self.pass_taken = 0
        if self._worker_check is not None:
            self._worker_check.begin_pass(da.known_length(self.adapter))

    def _take(self):
        try:
            batch = next(self._iterator)
        except StopIteration:
            batch = None
        if self._worker_check is not None and not self._worker_check.agree(batch is not None, self.pass_taken):
            return None
        if batch is None:
            return None
        self.pass_taken += 1
        return batch

    def _next(self):
        if self._iterator is None:
            self._begin_pass()
        batch = self._take()
        if batch is not None:
            return batch
        if isinstance(self.adapter, da.ArrayAdapter):
            self._begin_pass()
            return self._take()
        warnings.warn("Your input ran out of data; interrupting training. Make sure that your dataset or "
                      "generator can generate at least `steps_per_epoch * epochs` batches (use .repeat()).")
        self.exhausted = True
        return None


def check_class_weight(class_weight) -> None:
    """Refuse a ``class_weight`` that is not ``{class index: weight}`` before anything trains."""
    if class_weight is None:
        return
    if not isinstance(class_weight, Mapping):
        raise TypeError(f"`class_weight` must be a dict mapping class indices (integers) to a weight (float). "
                        f"Received: class_weight={class_weight!r} (type {type(class_weight).__name__}).")
    for k, v in class_weight.items():
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise ValueError(f"`class_weight` keys must be class indices (integers >= 0). Received the key {k!r} in "
                             f"class_weight={class_weight!r}.")
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"`class_weight` values must be numbers. Received {v!r} for class {k!r} in "
                            f"class_weight={class_weight!r}.")


def apply_class_weight(batch, class_weight):
    """A batch's sample weights from ``class_weight[label]`` (classes missing from the dict weigh 1)."""
    if not class_weight:
        return batch
    x, y, sw = da.unpack_x_y_sample_weight(batch)
    if y is None or isinstance(y, (list, tuple, dict)):
        raise ValueError("`class_weight` is only supported for models with a single output and labeled data.")
    if sw is not None:   # Keras 3 (TensorFlow 2.21) refuses to combine them; tf.keras 2 multiplied them
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time: Keras 3 (TensorFlow "
                         "2.21) refuses the pair. Fold the class weights into sample_weight yourself, e.g. "
                         "sample_weight * np.vectorize(class_weight.get)(y).")
    if isinstance(y, PerReplica):   # a distributed dataset's batch (auto-sharding OFF): each replica's rows
        return (x, y, PerReplica(tuple(_class_weights(v, class_weight) for v in y.values)))
    y = y if isinstance(y, torch.Tensor) else torch.as_tensor(y)
    return (x, y, _class_weights(y, class_weight))


def _class_weights(y: torch.Tensor, class_weight: dict) -> torch.Tensor:
    labels = y.argmax(-1) if y.ndim == 2 and y.shape[1] > 1 else (y if y.ndim == 1 else y.flatten(1)[:, 0])
    labels = labels.round().long() if labels.is_floating_point() else labels.long()
    size = max(max(int(k) for k in class_weight) + 1, int(labels.max()) + 1 if labels.numel() else 0)
    table = torch.ones(size)
    for k, v in class_weight.items():
        table[int(k)] = float(v)
    return table[labels.cpu()].to(y.device)
