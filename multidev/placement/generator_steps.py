"""How many 32-bit draws took torch's CPU generator from one state to another, and the same steps on
another state: what a DDP rank's generator does when its process runs the caller's code between steps.

A replica's stream that stands apart from the caller's (``torch.manual_seed(seed + rank)`` in the step,
replicas that drew different counts) must advance by what the caller drew between runs (a DataLoader
epoch's base seed, ``torch.rand`` in the loop), as each rank's process draws those from its own
generator. The CPU generator is an MT19937: its state holds the 624 words of the current block and the
position in it (``left`` / ``next``); draws walk the position and regenerate the block when it runs out.
The count is found by walking a copy block by block and checked against the whole state, so a state
the draws cannot reach (a re-seed, a cached normal of ``torch.randn(1)``, another torch's layout) gives
None, and the caller falls back to forking every replica from the caller's state.
"""

from __future__ import annotations

import torch

_BLOCK = 624
_WORDS = slice(24, 24 + _BLOCK * 8)   # the block (624 uint64 words) after initial seed, left, seeded, next
_MAX_BLOCKS = 32                      # ~20k draws: beyond, a fork from the caller's state (as before)


def _left_next(state: torch.Tensor) -> tuple[int, int]:
    return int(state[8:12].view(torch.int32)), int(state[16:24].view(torch.int64))


def _draw(generator: torch.Generator, count: int) -> None:
    if count > 0:   # one 32-bit word per int32 element
        torch.empty(count, dtype=torch.int32).random_(generator=generator)


def draws_between(before: torch.Tensor, after: torch.Tensor) -> int | None:
    """The number of 32-bit draws from CPU generator state ``before`` to ``after``, or None."""
    if before.numel() != after.numel() or before.numel() < _WORDS.stop:
        return None
    generator = torch.Generator()
    generator.set_state(before)
    left, _ = _left_next(before)
    drawn, _, next_after = 0, *_left_next(after)
    for block in range(_MAX_BLOCKS + 1):
        state = generator.get_state()
        if torch.equal(state[_WORDS], after[_WORDS]):
            rest = next_after - _left_next(state)[1]
            if rest < 0:
                return None
            _draw(generator, rest)
            return drawn + rest if torch.equal(generator.get_state(), after) else None
        step = left if block == 0 else _BLOCK   # (the draw that runs out of the block makes the next)
        _draw(generator, step)
        drawn += step
    return None


def advanced(state: torch.Tensor, draws: int) -> torch.Tensor:
    """``state`` after ``draws`` 32-bit draws."""
    generator = torch.Generator()
    generator.set_state(state)
    _draw(generator, draws)
    return generator.get_state()


__all__ = ["draws_between", "advanced"]
