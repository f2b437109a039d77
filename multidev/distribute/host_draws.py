"""How many numbers the caller drew from a host generator (Python's ``random.Random``, numpy's global
``RandomState``) between two runs, to move each replica's own stream as far (``host_random``).

Each DDP rank seeded alike makes the caller's draws between steps (graphsage-simple's ``random.shuffle(train)``
before each batch) on its own generator, which the step's draws may have moved apart from rank 0's. Both
generators are mt19937s whose state shows the 624-word block and the position in it: the count is found by
stepping a copy from the state the last run left, one block at a time, until its block is the caller's,
then comparing positions (as ``placement.caller_draws`` does for torch's). A changed cached Gaussian
(``random.gauss``, numpy's ``has_gauss``), a re-seed, or more than ``MAX_BLOCKS`` blocks give None: the
caller's state then reaches every replica, as a re-seed reaches every rank.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np

_WORDS = 624
MAX_BLOCKS = 256
# random.Random's own methods, taken before ``host_random.install`` routes them (this module is imported first).
_GETSTATE, _SETSTATE, _GETRANDBITS = random.Random.getstate, random.Random.setstate, random.Random.getrandbits


def _unrouted() -> random.Random:
    """A ``random.Random`` made without calling its (routed) ``seed``: ``setstate`` gives it its state."""
    generator = random.Random.__new__(random.Random)
    generator.gauss_next = None
    return generator


def _python_position(generator: random.Random) -> tuple:
    state = _GETSTATE(generator)[1]
    return state[:_WORDS], state[_WORDS]


def _numpy_position(generator: np.random.RandomState) -> tuple:
    state = generator.get_state(legacy=False)["state"]
    return state["key"], state["pos"]


def _count(generator: Any, position, draw, after_block, after_pos: int) -> int | None:
    """Steps ``generator`` (by 32-bit words with ``draw``) until its block is ``after_block``; the words drawn."""
    count = 0
    for _ in range(2 * MAX_BLOCKS + 2):
        block, pos = position(generator)
        if np.array_equal(np.asarray(block), np.asarray(after_block)):
            if after_pos < pos:
                return None
            draw(generator, after_pos - pos)
            return count + after_pos - pos
        step = _WORDS - pos if pos < _WORDS else 1   # to the block's end, then one draw twists it
        draw(generator, step)
        count += step
    return None


def _python_draw(generator: random.Random, words: int) -> None:
    if words:
        _GETRANDBITS(generator, 32 * words)


def _numpy_draw(generator: np.random.RandomState, words: int) -> None:
    if words:
        generator._bit_generator.random_raw(words)


def draws_between(before: Any, after: Any) -> int | None:
    """The 32-bit words drawn from host generator state ``before`` to ``after`` (same kind), or None."""
    if isinstance(before, tuple) and isinstance(after, tuple):
        if before[0] != after[0] or before[2] != after[2]:
            return None
        generator = _unrouted()
        _SETSTATE(generator, before)
        count = _count(generator, _python_position, _python_draw, after[1][:_WORDS], after[1][_WORDS])
        return count if count is not None and _GETSTATE(generator) == after else None
    if isinstance(before, dict) and isinstance(after, dict):
        if (before["has_gauss"], before["gauss"]) != (after["has_gauss"], after["gauss"]):
            return None
        generator = np.random.RandomState(0)
        generator.set_state(before)
        return _count(generator, _numpy_position, _numpy_draw, after["state"]["key"], after["state"]["pos"])
    return None


def advanced(state: Any, words: int) -> Any:
    """Host generator state ``state`` after ``words`` 32-bit draws."""
    if isinstance(state, tuple):
        generator = _unrouted()
        _SETSTATE(generator, state)
        _python_draw(generator, words)
        return _GETSTATE(generator)
    generator = np.random.RandomState(0)
    generator.set_state(state)
    _numpy_draw(generator, words)
    return generator.get_state(legacy=False)


__all__ = ["draws_between", "advanced", "MAX_BLOCKS"]
