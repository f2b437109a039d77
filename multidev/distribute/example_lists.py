"""Global batches that are lists of examples, not batched tensors: torchvision's detection reference batches
with ``collate_fn=lambda b: tuple(zip(*b))``, so a batch is ``(images, targets)``, a tuple of image tensors
(of different sizes) and a tuple of dicts (``{"boxes": (n_i, 4), "labels": (n_i,)}``). Cutting each tensor
along dimension 0 would cut an image's channels and a target's boxes, and where the sizes happen to agree
(3 channels, 3 boxes, 3 images) nothing would say so. Such a batch is cut by example: each replica gets its
consecutive examples of every sequence, in the order a DDP rank's half of the global batch holds them.

A batch is a list of examples when it is a list or tuple of sequences of one length (the examples), each
sequence holding items of one kind (dicts of the same keys, tensors of one rank and dtype, or Python
values of one type), and either a sequence holds dicts (no batched layout does) or its tensors disagree on
dimension 0 (no batched layout can be cut). ``((x1, x2), (y1, y2))`` of batched tensors share dimension 0
and stay tensors cut along it, as TensorFlow cuts them.
"""

from __future__ import annotations

from typing import Any

import torch


def _plain_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not hasattr(value, "_fields")


def _kind(item: Any) -> Any:
    """What one example of a sequence is: items of one kind make a sequence of examples."""
    if isinstance(item, dict):
        return ("dict", tuple(item))
    if isinstance(item, torch.Tensor):
        return ("tensor", item.dim(), item.dtype)
    return ("value", type(item))


def _dim0s(value: Any) -> set:
    if isinstance(value, torch.Tensor):
        return {value.shape[0]} if value.dim() else {None}
    if isinstance(value, dict):
        return set().union(*(_dim0s(v) for v in value.values())) if value else set()
    if _plain_sequence(value):
        return set().union(*(_dim0s(v) for v in value)) if value else set()
    return set()


def example_count(element: Any) -> int | None:
    """The number of examples of a batch that is a list of examples (see the module), else None."""
    if not _plain_sequence(element) or not element or not all(_plain_sequence(s) and s for s in element):
        return None
    lengths = {len(s) for s in element}
    if len(lengths) != 1 or any(len({_kind(item) for item in s}) != 1 for s in element):
        return None
    holds_dicts = any(isinstance(s[0], dict) for s in element)
    if not holds_dicts and len(_dim0s(element)) <= 1:
        return None   # batched tensors that agree on dimension 0: TensorFlow's cut
    return lengths.pop()


def split_examples(element: Any, sizes: list[int]) -> list[Any]:
    """Each replica's consecutive examples (``sizes[r]`` of them) of every sequence of ``element``."""
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    return [type(element)(type(s)(s[a:b]) for s in element) for a, b in zip(bounds, bounds[1:])]


def pack_examples(parts: list) -> Any:
    """The replicas' parts as one distributed element: each sequence a ``PerReplica`` of the replicas'
    sequences (their lengths may differ: a partial last batch)."""
    from multidev.values.distributed import PerReplica
    return type(parts[0])(PerReplica([part[i] for part in parts]) for i in range(len(parts[0])))
