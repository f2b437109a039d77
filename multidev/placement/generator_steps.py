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

from typing import Any, Callable

import torch

_BLOCK = 624
_WORDS = slice(24, 24 + _BLOCK * 8)   # the block (624 uint64 words) after initial seed, left, seeded, next
_MAX_BLOCKS = 32                      # ~20k draws: beyond, a fork from the caller's state (as before)


class MersenneSteps:
    """The walk for one MT19937 generator kind (torch's CPU generator here; Python's ``random`` and numpy's
    ``RandomState`` in ``distribute/host_random_steps``): a state's block and position in it, the draws to the
    end of the current block, a copy made from a state, draws of 32-bit words on it, the copy's state, equality."""

    def __init__(self, words: Callable, position: Callable, to_block_end: Callable, make: Callable, draw: Callable,
                 state_of: Callable, same: Callable):
        self.words, self.position, self.to_block_end, self.make, self.draw, self.state_of, self.same = \
            words, position, to_block_end, make, draw, state_of, same

    def draws_between(self, before: Any, after: Any) -> int | None:
        """The number of 32-bit draws from state ``before`` to ``after``, or None."""
        copy, drawn = self.make(before), 0
        for block in range(_MAX_BLOCKS + 1):
            state = self.state_of(copy)
            if self.same(self.words(state), self.words(after)):
                rest = self.position(after) - self.position(state)
                if rest < 0:
                    return None
                self.draw(copy, rest)
                return drawn + rest if self.same(self.state_of(copy), after) else None
            step = self.to_block_end(state) if block == 0 else _BLOCK   # (the draw past the end makes the next)
            self.draw(copy, step)
            drawn += step
        return None

    def advanced(self, state: Any, draws: int) -> Any:
        """``state`` after ``draws`` 32-bit draws."""
        copy = self.make(state)
        self.draw(copy, draws)
        return self.state_of(copy)


def _left_next(state: torch.Tensor) -> tuple[int, int]:
    return int(state[8:12].view(torch.int32)), int(state[16:24].view(torch.int64))


def _torch_copy(state: torch.Tensor) -> torch.Generator:
    generator = torch.Generator()
    generator.set_state(state)
    return generator


def _torch_draw(generator: torch.Generator, count: int) -> None:
    if count > 0:   # one 32-bit word per int32 element
        torch.empty(count, dtype=torch.int32).random_(generator=generator)


_TORCH_CPU = MersenneSteps(lambda s: s[_WORDS], lambda s: _left_next(s)[1], lambda s: _left_next(s)[0], _torch_copy,
                           _torch_draw, torch.Generator.get_state, torch.equal)


def draws_between(before: torch.Tensor, after: torch.Tensor) -> int | None:
    """The number of 32-bit draws from CPU generator state ``before`` to ``after``, or None."""
    if before.numel() != after.numel() or before.numel() < _WORDS.stop:
        return None
    return _TORCH_CPU.draws_between(before, after)


def advanced(state: torch.Tensor, draws: int) -> torch.Tensor:
    """``state`` after ``draws`` 32-bit draws."""
    return _TORCH_CPU.advanced(state, draws)


__all__ = ["MersenneSteps", "draws_between", "advanced"]
