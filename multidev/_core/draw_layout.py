"""A tensor of ones for a global batch laid out in memory as a replica's inputs are.

torch's ``F.dropout`` fills its mask in the memory order of its input (``bernoulli_`` on ``empty_like``, which keeps
a dense tensor's strides). A ``Conv1D``/``Conv2D`` output is a ``movedim`` of torch's channels-first result, so its
memory order is not its logical order: the mask one device draws for it is not the mask of contiguous ones of its
shape. Drawing a replica's rows of the global batch's mask (``md.keras``'s and Keras 3's ``Dropout`` on replicas)
must therefore draw over ones in the inputs' layout, with the batch dimension outermost, to give one device's
numbers.
"""

from __future__ import annotations

import torch


def ones_like_rows(inputs: torch.Tensor, rows: int) -> torch.Tensor:
    """Ones of shape ``(rows, *inputs.shape[1:])`` whose strides are ordered as ``inputs``'s (contiguous when
    ``inputs`` is contiguous, not dense, or its batch dimension is not the outermost: then torch's draw for it is
    not a stack of per-row draws anyway)."""
    shape = (rows, *inputs.shape[1:])
    if inputs.is_contiguous() or inputs.dim() < 2 or not _dense(inputs):
        return torch.ones(shape, dtype=inputs.dtype, device=inputs.device)
    order = sorted(range(inputs.dim()), key=lambda d: -inputs.stride(d))   # outermost first (stable for ties)
    if order[0] != 0:
        return torch.ones(shape, dtype=inputs.dtype, device=inputs.device)
    stored = torch.ones([shape[d] for d in order], dtype=inputs.dtype, device=inputs.device)
    return stored.permute([order.index(d) for d in range(inputs.dim())])


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill its storage span without gaps or overlaps (torch keeps such strides)."""
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: t.stride(d)):
        if t.shape[d] == 1:
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True
