"""How many numbers the caller drew from torch's CPU generator between two runs, to move each replica's own
stream as far (``ReplicaStreams.fork``).

Each DDP rank seeded alike draws the caller's numbers between steps (a new epoch's ``for batch in loader``
draws the loader's base seed) from its own generator, which the step's draws may have moved apart from rank
0's (a neighbour sampler drawing as many numbers as its subgraph has edges). Replica 0 draws from torch's
generator itself; replica r must advance its own state by as many draws as the caller made, not take the
caller's state (rank 0's). torch's CPU generator is an mt19937 whose state tensor is its C struct
(``CPUGeneratorImplState``): the seed, ``left`` and ``next`` of the 624-word block, the block, then cached
normal samples. The count is found by stepping a copy from the state the last run left, one block at a
time, until its block is the caller's, then comparing ``next``. Anything else (a re-seed, ``set_rng_state``,
a cached normal sample taken or made, more than ``MAX_BLOCKS`` blocks) gives None: the caller's state then
reaches every replica, as a re-seed reaches every rank.
"""
from __future__ import annotations

import struct

import torch

_STATE_BYTES = 5056                 # sizeof(CPUGeneratorImplState)
_HEAD = struct.Struct("<QiiQ")     # the_initial_seed, left, seeded, next
_BLOCK = slice(_HEAD.size, _HEAD.size + 624 * 8)
_MT_END = _BLOCK.stop               # after it: the cached normal samples
MAX_BLOCKS = 256                    # 160k draws: a caller's shuffle of a small data set; then give up


def _head(state: torch.Tensor) -> tuple:
    return _HEAD.unpack(state[:_HEAD.size].numpy().tobytes())


def _draw(generator: torch.Generator, count: int) -> None:
    """``count`` 32-bit draws (``randint`` below 2**32 takes one per element, in order)."""
    if count:
        torch.randint(0, 2, (count,), generator=generator)


def draws_between(before: torch.Tensor, after: torch.Tensor) -> int | None:
    """The number of 32-bit draws that take CPU generator state ``before`` to ``after``, or None."""
    if before.numel() != _STATE_BYTES or after.numel() != _STATE_BYTES:
        return None
    seed, _, _, after_next = _head(after)
    if seed != _head(before)[0] or not torch.equal(before[_MT_END:], after[_MT_END:]):
        return None   # re-seeded, or a normal sample cached or used: not plain draws
    generator = torch.Generator()
    generator.set_state(before)
    state, count = before, 0
    for _ in range(MAX_BLOCKS + 1):
        _, left, _, nxt = _head(state)
        if torch.equal(state[_BLOCK], after[_BLOCK]):
            if after_next < nxt:
                return None
            _draw(generator, after_next - nxt)
            return count + after_next - nxt if torch.equal(generator.get_state(), after) else None
        _draw(generator, left)   # to the next block (its first word drawn)
        count += left
        state = generator.get_state()
    return None


def advanced(state: torch.Tensor, count: int) -> torch.Tensor:
    """CPU generator state ``state`` after ``count`` 32-bit draws."""
    generator = torch.Generator()
    generator.set_state(state)
    _draw(generator, count)
    return generator.get_state()


__all__ = ["draws_between", "advanced", "MAX_BLOCKS"]
