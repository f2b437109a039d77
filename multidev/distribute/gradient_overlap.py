"""Overlap the cross-process gradient all-reduce with the backward pass (one replica per worker).

Gradients are grouped in buckets in reverse parameter order (the order backward produces them).
A post-accumulate-grad hook on each parameter counts arrivals; when a bucket is complete, and every
earlier bucket has been launched (so all workers launch in the same order), its flat buffer starts
an asynchronous all-reduce while backward continues. ``finish()`` (called when backward ends, by
``backward_reduce``) launches whatever did not complete, waits, and returns the sums. Only the
gradients this backward accumulated count (another network's ``.grad`` left by an earlier backward
is not this one's); unused parameters count as zeros, with a presence flag so a gradient missing
everywhere stays None.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from multidev._core.enums import ReduceOp
from multidev._core.never_compiled import never_compiled
from multidev.distribute.gradient_buckets import BucketBuffers, plan_buckets, unpack_bucket


class GradientOverlap:
    """``loss.backward()``'s reducer for ``MultiWorkerMirroredStrategy`` with one local replica."""

    def __init__(self, process: Any, refs: Sequence[torch.Tensor], bucket_bytes: int):
        self._process = process
        self._refs = list(refs)
        order = list(range(len(refs)))[::-1]
        buckets = plan_buckets([refs[i] for i in order], bucket_bytes)
        self._buckets = [[order[j] for j in b] for b in buckets]
        self._bucket_of = {i: b for b, members in enumerate(self._buckets) for i in members}
        # (a parameter written in place with gradients recorded, an EMA target updated outside no_grad, is
        # no leaf any more: autograd accumulates no .grad into it, as into a frozen one)
        self._handles = [t.register_post_accumulate_grad_hook(self._on_grad) for t in self._refs
                         if t.requires_grad and t.is_leaf]
        self._index = {id(t): i for i, t in enumerate(self._refs)}
        self._buffers = BucketBuffers()
        self._reset()

    def _reset(self) -> None:
        self._reached: set[int] = set()   # parameters this backward accumulated into (the others' .grad is not its)
        self._arrived = [0] * len(self._buckets)
        self._pending: list[Any] = [None] * len(self._buckets)
        self._launched = 0
        self._dirty = False

    @never_compiled   # (autograd's engine calls it in the replica thread: never_compiled)
    def _on_grad(self, tensor: torch.Tensor) -> None:
        i = self._index[id(tensor)]
        self._reached.add(i)
        b = self._bucket_of[i]
        if self._pending[b] is not None:  # gradients accumulated again after launch: redo at finish()
            self._dirty = True
            return
        self._arrived[b] += 1
        while self._launched < len(self._buckets) and self._arrived[self._launched] == len(self._buckets[self._launched]):
            self._launch(self._launched)
            self._launched += 1

    def _flat(self, b: int) -> torch.Tensor:
        grads = [t.grad if i in self._reached else None for i, t in enumerate(self._refs)]
        return self._buffers.pack(b, self._refs, grads, self._buckets[b])

    def _launch(self, b: int) -> None:
        flat = self._flat(b)
        self._pending[b] = (flat, self._process.all_reduce_async(flat, ReduceOp.SUM))

    def finish(self) -> list[torch.Tensor | None]:
        """The summed gradients of every parameter (None where no worker had one)."""
        for b in range(self._launched, len(self._buckets)):
            self._launch(b)
        out: list[torch.Tensor | None] = [None] * len(self._refs)
        pending, dirty = self._pending, self._dirty
        for b, (flat, work) in enumerate(pending):
            work.wait()
        if dirty:  # a second backward before the step: reduce the accumulated gradients again, in order
            pending = []
            for b in range(len(self._buckets)):
                flat = self._flat(b)
                pending.append((self._process.all_reduce(flat, ReduceOp.SUM), None))
        self._reset()
        for b, (flat, _) in enumerate(pending):
            unpack_bucket(flat, self._refs, self._buckets[b], out)
        return out

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
