"""``md.keras.utils.set_random_seed``: seed Python, NumPy and torch at once (Keras's helper)."""

from __future__ import annotations

import random

import numpy as np

from multidev import random as md_random


def set_random_seed(seed) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (``md.random.set_seed``).

    Raises:
        ValueError: ``seed`` is not an integer (Keras's check).

    Example:
        >>> md.keras.utils.set_random_seed(812)
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"Expected `seed` argument to be an integer. Received: seed={seed!r} (of type {type(seed)})")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    md_random.set_seed(seed)
