"""Sum gradients across replicas in a few flat buckets: one collective per bucket, not per tensor.

Each bucket also carries one presence flag per gradient, so a gradient that is None on every
replica stays None (the optimizer skips it, as on one device), while one missing on some
replicas only counts as zeros there.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from multidev._core.enums import ReduceOp

DEFAULT_BUCKET_BYTES = 32 * 1024 * 1024


def plan_buckets(refs: Sequence[torch.Tensor], bucket_bytes: int) -> list[list[int]]:
    """Group tensor indices into buckets of one dtype and device, each at most ``bucket_bytes``."""
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    key = None
    for i, ref in enumerate(refs):
        k = (ref.dtype, ref.device)
        nbytes = ref.numel() * ref.element_size()
        if current and (k != key or size + nbytes > bucket_bytes):
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes
        key = k
    if current:
        buckets.append(current)
    return buckets


def pack_bucket(refs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None], bucket: list[int],
                out: torch.Tensor) -> torch.Tensor:
    """Fill ``out`` (numel of the bucket's gradients + one per gradient): the bucket's gradients
    (zeros where missing), then one presence flag each. A gradient that already is its slot of
    ``out`` (accumulated in place into last step's view) is not copied."""
    offset = 0
    for i in bucket:
        n = refs[i].numel()
        slot, g = out[offset:offset + n], grads[i]
        if g is None:
            slot.zero_()
        elif g.is_sparse:   # an nn.Embedding(sparse=True)'s: travels dense (backward_reduce makes it sparse again)
            slot.view(refs[i].shape).copy_(g.to_dense())
        elif g.data_ptr() != slot.data_ptr() or g.stride() != refs[i].stride():
            slot.view(refs[i].shape).copy_(g)
        offset += n
    if all(grads[i] is not None for i in bucket):
        out[offset:].fill_(1.0)    # no host data: a copy from a Python list into GPU memory waits for the device
    else:
        flags = [0.0 if grads[i] is None else 1.0 for i in bucket]
        out[offset:].copy_(torch.tensor(flags, dtype=out.dtype, device="cpu"))
    return out


def unpack_bucket(flat: torch.Tensor, refs: Sequence[torch.Tensor], bucket: list[int],
                  out: list[torch.Tensor | None], all_present: bool = False) -> None:
    """Write views of a reduced ``pack_bucket`` buffer into ``out``; a gradient no replica had stays None.
    ``all_present``: the caller knows some replica had each (reading the flags is a GPU sync)."""
    present = [1] * len(bucket) if all_present else flat[-len(bucket):].tolist()
    offset = 0
    for i, count in zip(bucket, present):
        n = refs[i].numel()
        if count > 0:
            out[i] = flat[offset:offset + n].view(refs[i].shape)
        offset += n


class BucketBuffers:
    """Flat bucket buffers reused step after step, for one replica: allocating tens of MB each
    step costs page faults on CPU.

    The reduced gradients handed out are views of these buffers. A buffer is reused only when
    nothing but its parameters' ``.grad`` references it (where backward may have accumulated into
    last step's views in place); if anything else still holds it (a gradient kept by user code, a
    view of one), the step gets a fresh buffer, so a tensor someone holds never changes under them.
    """

    def __init__(self) -> None:
        self._buffers: dict[int, torch.Tensor] = {}

    def pack(self, b: int, refs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None],
             bucket: list[int]) -> torch.Tensor:
        """Bucket ``b`` packed into its reusable buffer (a fresh one if the old one is still held)."""
        size = sum(refs[i].numel() for i in bucket) + len(bucket)
        buffer = self._buffers.pop(b, None)
        if buffer is None or buffer.numel() != size or not _only_held_as_grads(buffer, refs, bucket):
            ref = refs[bucket[0]]
            buffer = torch.empty(size, dtype=ref.dtype, device=ref.device)
        self._buffers[b] = buffer
        return pack_bucket(refs, grads, bucket, out=buffer)


def _only_held_as_grads(buffer: torch.Tensor, refs: Sequence[torch.Tensor], bucket: list[int]) -> bool:
    if _storage_use_count is None:
        return False  # cannot tell: never reuse
    storage = buffer.untyped_storage()
    as_grad = sum(1 for i in bucket if refs[i].grad is not None and not refs[i].grad.is_sparse
                  and refs[i].grad.untyped_storage().data_ptr() == storage.data_ptr())
    # References: ``buffer`` itself, the ``storage`` handle above, and one per gradient view.
    return _storage_use_count(storage._cdata) == 2 + as_grad


_storage_use_count = getattr(torch._C, "_storage_Use_Count", None)


class GradientBuckets:
    """All-reduces the gradients of a fixed list of parameters, bucket by bucket."""

    def __init__(self, bucket_bytes: int = DEFAULT_BUCKET_BYTES):
        self.bucket_bytes = bucket_bytes
        self._buckets: list[list[int]] | None = None
        self._key: tuple = ()
        self._buffers: dict[int, BucketBuffers] = {}  # per replica

    def all_reduce(self, ctx: Any, refs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None],
                   op: ReduceOp, all_present: bool = False) -> list[torch.Tensor | None]:
        """The replicas' reduced gradients for ``refs`` (the local parameter copies); None where no
        replica had a gradient (``all_present``: the caller knows some replica had each)."""
        key = tuple((r.numel(), r.dtype, r.device) for r in refs)
        if self._buckets is None or key != self._key:
            self._buckets, self._key = plan_buckets(refs, self.bucket_bytes), key
        buffers = self._buffers.get(ctx._replica_id)
        if buffers is None:
            buffers = self._buffers.setdefault(ctx._replica_id, BucketBuffers())
        out: list[torch.Tensor | None] = [None] * len(refs)
        for b, bucket in enumerate(self._buckets):
            unpack_bucket(ctx._all_reduce_owned(op, buffers.pack(b, refs, grads, bucket)), refs, bucket, out,
                          all_present)
        return out
