"""The random streams a torch DataLoader draws from, saved and put back.

``iter(loader)`` draws the loader's base seed from its ``generator=`` (torch's default generator without
one); a ``RandomSampler`` draws its order from its generator; a dataset may draw from Python's ``random``
or numpy's ``np.random``. Reading a loader only to learn its element spec must leave them where they
were (each DDP rank's program draws only when it iterates); ``distribute.pipeline_random`` reads the
pipelines of one process as DDP's ranks read theirs with the same states.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Iterator

import numpy as np
import torch
import torch.utils.data as tud


def generators_of(loader: Any) -> list[torch.Generator]:
    """The ``torch.Generator`` objects a DataLoader draws from (its own, its samplers'), once each."""
    if not isinstance(loader, tud.DataLoader):
        return []
    batch_sampler = getattr(loader, "batch_sampler", None)
    holders = (loader, loader.sampler, batch_sampler, getattr(batch_sampler, "sampler", None))
    found = {id(g): g for g in (getattr(h, "generator", None) for h in holders) if isinstance(g, torch.Generator)}
    return list(found.values())


class StreamStates:
    """Reads and writes together the states of torch's default CPU generator, ``generators``, Python's
    ``random`` and numpy's ``np.random``."""

    def __init__(self, generators: list[torch.Generator] = ()):
        self._generators = [torch.default_generator, *(g for g in generators if g is not torch.default_generator)]

    def get(self) -> tuple:
        return [g.get_state() for g in self._generators], random.getstate(), np.random.get_state()

    def set(self, state: tuple) -> None:
        torch_states, python_state, numpy_state = state
        for g, s in zip(self._generators, torch_states):
            g.set_state(s)
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@contextlib.contextmanager
def streams_kept(loader: Any) -> Iterator[None]:
    """Iterating ``loader`` inside leaves its random streams (and a persistent-workers iterator) as they were."""
    states = StreamStates(generators_of(loader))
    saved = states.get()
    had_iterator = getattr(loader, "_iterator", None) is not None
    try:
        yield
    finally:
        states.set(saved)
        if isinstance(loader, tud.DataLoader) and not had_iterator and loader._iterator is not None:
            loader._iterator = None   # its workers' seeds were drawn by the peek: the first real pass draws them
