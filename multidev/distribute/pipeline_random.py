"""Random draws made while reading ``distribute_datasets_from_function``'s pipelines, made as DDP's ranks make them.

Each DDP rank reads its own loader with its own, identically seeded streams: ``iter(loader)`` draws the
loader's base seed from its ``generator=`` (torch's default generator without one), a ``RandomSampler`` its
order, an ``IterableDataset`` whatever it draws; every rank draws the same values and its generator
advances once. On one process the pipelines' loaders were read in turn on one thread, so pipeline 1 drew
the values after pipeline 0's (other worker seeds, other augmentation) and the caller's generator advanced
once per pipeline: every draw after it, the step's dropout included, differed from DDP's
(``tests/programs/loader_programs.py``: ``per_pipeline_dropout`` 0.86 off DDP's weights after 10 steps).

``RoundStreams`` reads each pipeline past the first from a copy of the shared streams as the first found
them, then puts back the state the first left (``data.random_streams``: torch's default CPU generator,
Python's ``random``, numpy's ``np.random``, and any ``torch.Generator`` the first pipeline's loader shares
with another: PyTorch's reproducibility recipe, one ``g`` captured by ``dataset_fn``). A generator of a
pipeline's own is its own stream, as each rank's. Only on the caller's thread: a fetch-ahead thread must
not rewind streams the caller's thread draws from meanwhile.

Torch's default CPU generator is one stream per rank for the loader and the step alike: where replicas share
the CPU (logical CPUs), pipeline r of one pipeline per replica reads on replica r's own stream
(``placement.replica_random``), which its step continues and its next read continues after, as rank r's
generator. A copy per round made a pipeline whose draws depend on its data (a ``collate_fn`` sampling
neighbours, as many draws as its subgraph has edges) draw pipeline 0's numbers again at the next round
(a GraphSAGE on sampled subgraphs 0.018 off DDP's weights after 6 steps, silently).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev.data.random_streams import StreamStates, generators_of


def shared_generators(loaders: list) -> list[torch.Generator]:
    """The generators the first pipeline's loader shares with another pipeline's (by identity)."""
    if len(loaders) < 2:
        return []
    others = {id(g) for loader in loaders[1:] for g in generators_of(loader)}
    return [g for g in generators_of(loaders[0]) if id(g) in others]


class RoundStreams:
    """``round(calls)``: ``calls[0]()`` on the streams themselves, each later call on a copy of them as
    ``calls[0]`` found them; afterwards the streams stand where ``calls[0]`` left them."""

    def __init__(self, generators: list[torch.Generator], replica_streams: Any = None):
        self._states = StreamStates(generators)
        self._replica_streams = replica_streams   # a ReplicaStreams, or None

    def _own_cpu_streams(self, count: int) -> list:
        """Each pipeline's replica stream of torch's CPU generator (None for the first), or [] if none."""
        streams = self._replica_streams
        if streams is None or len(streams.streams) != count:
            return []
        own = [s if s is not None and not s.owner and s.device.type == "cpu" else None for s in streams.streams]
        return own if any(s is not None for s in own) else []

    def round(self, calls: list[Callable[[], Any]]) -> list:
        if len(calls) < 2:
            return [c() for c in calls]
        own = self._own_cpu_streams(len(calls))
        if own:
            self._replica_streams.fork_devices()   # the replicas' streams take in the caller's draws since the last run
        before = self._states.get()
        results = [calls[0]()]
        after = self._states.get()
        try:
            for call, stream in zip(calls[1:], own[1:] or [None] * len(calls)):
                self._states.set(before)
                if stream is not None:
                    torch.default_generator.set_state(stream.state)
                results.append(call())
                if stream is not None:
                    stream.state = torch.default_generator.get_state()
        finally:
            self._states.set(after)
            if own:
                self._replica_streams.join_devices()   # the next run continues each replica's stream from here
        return results
