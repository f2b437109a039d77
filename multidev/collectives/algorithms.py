"""In-process collective algorithms over one tensor per replica device.

Each function takes the replicas' tensors (``inputs[r]`` on replica r's device) and returns one
result per replica. Tensors already on the right device are not copied: replicas that share a
device (logical CPUs) share the result, so callers treat results as read-only unless
``private=True`` asks for one private copy per replica.
"""

from __future__ import annotations

from typing import Sequence

import torch

from multidev._core.enums import ReduceOp
from multidev._core.errors import InvalidArgumentError
from multidev.devices.stream_order import to_device


def _check_same_shape(inputs: Sequence[torch.Tensor]) -> None:
    """The replicas' tensors are added element-wise, so their shapes must be equal (TensorFlow's AddN
    refuses [2, 2] + [1, 2]; torch would broadcast it into a silently wrong sum)."""
    shape = inputs[0].shape
    for r, t in enumerate(inputs[1:], start=1):
        if t.shape != shape:
            raise InvalidArgumentError(
                f"Cannot reduce the replicas' values element-wise: replica 0 has shape {list(shape)}, replica {r} "
                f"has shape {list(t.shape)}. Per-example values of uneven batches (a partial last batch) "
                "differ in their first dimension: reduce them along it with axis=0 "
                "(strategy.reduce('SUM', value, axis=0)), or reduce each replica's value to a scalar first.")


def _sum(inputs: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    _check_same_shape(inputs)
    first = to_device(inputs[0], device)
    if len(inputs) == 1:
        return first.clone()
    total = torch.add(first, to_device(inputs[1], device))
    for t in inputs[2:]:
        total.add_(to_device(t, device))
    return total


def divide_(total: torch.Tensor, n: int) -> torch.Tensor:
    """``total / n`` in place (MEAN after a SUM); integer tensors round down, as TensorFlow's do."""
    if total.is_floating_point() or total.is_complex():
        return total.div_(n)
    return total.copy_(torch.div(total, n, rounding_mode="floor"))


def reduce_to_one(inputs: Sequence[torch.Tensor], op: ReduceOp, device: torch.device) -> torch.Tensor:
    """Sum (or average) every replica's tensor onto ``device``."""
    total = _sum(inputs, device)
    return divide_(total, len(inputs)) if op is ReduceOp.MEAN else total


def broadcast(value: torch.Tensor, devices: Sequence[torch.device], *, private: bool = False) -> list[torch.Tensor]:
    """One copy of ``value`` per device (shared where the device is ``value``'s, unless ``private``)."""
    out = []
    for device in devices:
        same = value.device == device
        out.append(value.clone() if same and private else value if same else to_device(value, device))
    return out


def all_reduce(inputs: Sequence[torch.Tensor], op: ReduceOp, devices: Sequence[torch.device],
               reduce_device: torch.device, *, private: bool = False) -> list[torch.Tensor]:
    """Reduce onto ``reduce_device`` then broadcast back (TensorFlow's ReductionToOneDevice)."""
    return broadcast(reduce_to_one(inputs, op, reduce_device), devices, private=private)


def nccl_all_reduce(inputs: Sequence[torch.Tensor], op: ReduceOp) -> list[torch.Tensor]:
    """Single-process multi-GPU all-reduce through NCCL; one distinct GPU per input."""
    import torch.cuda.nccl as nccl

    outputs = [t.clone() for t in inputs]
    nccl.all_reduce(outputs)
    if op is ReduceOp.MEAN:
        for o in outputs:
            divide_(o, len(outputs))
    return outputs


def hierarchical_copy_all_reduce(inputs: Sequence[torch.Tensor], op: ReduceOp,
                                 devices: Sequence[torch.device]) -> list[torch.Tensor]:
    """Pairwise-tree reduction over the devices, then broadcast (TensorFlow's HierarchicalCopyAllReduce)."""
    level = [to_device(t, d) for t, d in zip(inputs, devices)]
    level = [t.clone() for t in level]
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), 2):
            if i + 1 < len(level):
                level[i].add_(to_device(level[i + 1], level[i].device))
            nxt.append(level[i])
        level = nxt
    total = level[0]
    if op is ReduceOp.MEAN:
        divide_(total, len(inputs))
    return broadcast(total, devices, private=True)


def all_gather(inputs: Sequence[torch.Tensor], axis: int, devices: Sequence[torch.device]) -> list[torch.Tensor]:
    """Concatenate the replicas' tensors along ``axis``; every replica gets the result."""
    gathered = torch.cat([to_device(t, devices[0]) for t in inputs], dim=axis)
    return broadcast(gathered, devices, private=True)


#: The replicas' pieces of one chunk of a cooperative reduction together span at most this many bytes
#: (half a 2 MiB L2 cache), so copying a chunk's sum to the other replicas reads it from cache.
_CHUNK_BYTES = 1 << 20


def reduce_slice(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], part: slice, op: ReduceOp) -> None:
    """One replica's share of a cooperative all-reduce in shared memory: ``outputs[k][part]`` =
    the reduction of every ``inputs[j][part]``, for flat tensors of one device and dtype.

    Replicas of one process on one CPU each call it with a disjoint ``part``, so the work and the
    memory traffic are split across their threads. ``outputs`` may be ``inputs`` (in place).
    ``part`` goes in chunks of ``_CHUNK_BYTES`` over all replicas (each element is summed in replica
    order, as in one pass): the copies of a chunk's sum then read it from the cache rather than from
    memory, 10-12% less time per reduction on the 2-replica mlp (benchmarks/RESULTS.md, "Session 11
    perf"; chunks of 2 MiB per replica measured no faster).
    """
    chunk = max(1, _CHUNK_BYTES // (len(inputs) * inputs[0].element_size()))
    for start in range(part.start, part.stop, chunk):
        _reduce_piece(inputs, outputs, slice(start, min(part.stop, start + chunk)), op)


def _reduce_piece(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], part: slice, op: ReduceOp) -> None:
    n = len(inputs)
    total = outputs[0][part]
    torch.add(inputs[0][part], inputs[1][part], out=total)
    for x in inputs[2:]:
        total.add_(x[part])
    if op is ReduceOp.MEAN:
        divide_(total, n)
    for o in outputs[1:]:
        o[part].copy_(total)


def replica_slice(numel: int, replica_id: int, num_replicas: int) -> slice:
    """The contiguous range of a flat buffer that replica ``replica_id`` reduces."""
    chunk = -(-numel // num_replicas)
    return slice(min(numel, replica_id * chunk), min(numel, (replica_id + 1) * chunk))
