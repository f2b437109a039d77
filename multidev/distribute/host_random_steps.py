"""How many 32-bit draws took Python's ``random.Random`` or numpy's ``RandomState`` from one state to another,
and the same steps on another state: what a DDP rank's process does when it runs the caller's code (a
``random.shuffle`` per epoch, ``np.random.rand`` in the loop) between steps on its own generator
(``host_random``: a replica standing apart, ``random.seed(seed + rank)``, advances by as many draws).

Both are MT19937: the state holds the 624 words of the current block and the position in it; a draw past
the block's end makes the next block. The count is found by walking a copy block by block and checked
against the whole state: a state draws cannot reach (a re-seed, a cached Gaussian) gives None.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np

_BLOCK = 624
_MAX_BLOCKS = 32   # ~20k draws: beyond, a fork from the caller's state (as before)


class _Steps:
    """One generator kind: its block and position in a state, a copy, draws of 32-bit words, equality."""

    def __init__(self, words: Callable, position: Callable, make: Callable, draw: Callable, state_of: Callable,
                 same: Callable):
        self.words, self.position, self.make, self.draw, self.state_of, self.same = \
            words, position, make, draw, state_of, same

    def draws_between(self, before: Any, after: Any) -> int | None:
        copy, drawn = self.make(before), 0
        for block in range(_MAX_BLOCKS + 1):
            state = self.state_of(copy)
            if self.same(self.words(state), self.words(after)):
                rest = self.position(after) - self.position(state)
                if rest < 0:
                    return None
                self.draw(copy, rest)
                return drawn + rest if self.same(self.state_of(copy), after) else None
            step = _BLOCK - self.position(state) + 1 if block == 0 else _BLOCK
            self.draw(copy, step)
            drawn += step
        return None

    def advanced(self, state: Any, draws: int) -> Any:
        copy = self.make(state)
        self.draw(copy, draws)
        return self.state_of(copy)


def _numpy_copy(state: dict) -> np.random.RandomState:
    copy = np.random.RandomState(0)
    copy.set_state(state)
    return copy


def python_steps(getstate: Callable, setstate: Callable, getrandbits: Callable, same: Callable) -> _Steps:
    """Steps of ``random.Random`` states, through the unrouted methods ``host_random`` holds."""
    def make(state):
        copy = random.Random.__new__(random.Random)
        setstate(copy, state)
        return copy

    def draw(copy, count):
        if count > 0:
            getrandbits(copy, 32 * count)   # one word per 32 bits

    return _Steps(lambda s: s[1][:_BLOCK], lambda s: s[1][_BLOCK], make, draw, getstate, same)


def numpy_steps(same: Callable) -> _Steps:
    """Steps of numpy's legacy ``RandomState`` states (``get_state(legacy=False)``'s dictionaries)."""
    def draw(copy, count):
        if count > 0:
            copy.bytes(4 * count)   # one word per 4 bytes

    return _Steps(lambda s: s["state"]["key"], lambda s: s["state"]["pos"], _numpy_copy, draw,
                  lambda copy: copy.get_state(legacy=False), same)


__all__ = ["python_steps", "numpy_steps"]
