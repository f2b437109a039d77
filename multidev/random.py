"""``md.random``: the global seed (``tf.random.set_seed``) for torch's random ops and md.data.

Ops in multidev are torch ops, so the global seed is torch's: ``set_seed(s)`` seeds torch's
default generators (CPU and every GPU); shuffles and random layers created afterwards repeat run
after run. ``set_seed(None)`` reseeds non-deterministically.

Example:
    >>> md.random.set_seed(42); a = torch.rand(2)
    >>> md.random.set_seed(42); torch.equal(a, torch.rand(2))
    True
"""

from __future__ import annotations

import torch


def set_seed(seed) -> None:
    """Set the global random seed (``torch.manual_seed``); None picks a fresh non-deterministic seed.

    Raises:
        TypeError: ``seed`` is not an integer (or None).

    Example:
        >>> md.random.set_seed(1234)
    """
    if seed is None:
        torch.seed()
        return
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"set_seed expects an integer seed (or None), got {seed!r} of type {type(seed).__name__}.")
    torch.manual_seed(seed)


__all__ = ["set_seed"]


def __getattr__(name: str):
    """``md.random.normal`` and other tf.random ops: an AttributeError naming torch's random op."""
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.random", name, f"tf.random.{name}")
