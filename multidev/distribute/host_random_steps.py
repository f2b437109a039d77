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
from typing import Callable

import numpy as np

from multidev.placement.generator_steps import MersenneSteps

_BLOCK = 624


def _numpy_copy(state: dict) -> np.random.RandomState:
    copy = np.random.RandomState(0)
    copy.set_state(state)
    return copy


def python_steps(getstate: Callable, setstate: Callable, getrandbits: Callable, same: Callable) -> MersenneSteps:
    """Steps of ``random.Random`` states, through the unrouted methods ``host_random`` holds."""
    def make(state):
        copy = random.Random.__new__(random.Random)
        setstate(copy, state)
        return copy

    def draw(copy, count):
        if count > 0:
            getrandbits(copy, 32 * count)   # one word per 32 bits

    return MersenneSteps(lambda s: s[1][:_BLOCK], lambda s: s[1][_BLOCK], lambda s: _BLOCK - s[1][_BLOCK] + 1, make,
                         draw, getstate, same)


def numpy_steps(same: Callable) -> MersenneSteps:
    """Steps of numpy's legacy ``RandomState`` states (``get_state(legacy=False)``'s dictionaries)."""
    def draw(copy, count):
        if count > 0:
            copy.bytes(4 * count)   # one word per 4 bytes

    position = lambda s: s["state"]["pos"]  # noqa: E731
    return MersenneSteps(lambda s: s["state"]["key"], position, lambda s: _BLOCK - position(s) + 1, _numpy_copy, draw,
                         lambda copy: copy.get_state(legacy=False), same)


__all__ = ["python_steps", "numpy_steps"]
