"""Order between the CUDA streams of replicas (``registry.stream_for``) and of their caller.

Each replica on a GPU runs its kernels on a stream of its own, so replicas of one GPU overlap; CUDA orders
work only within a stream. Wherever a tensor crosses streams it needs an edge, an event, not a host sync:

* a ``strategy.run``'s replicas start after the work their caller queued (their inputs, variable writes
  between steps), and the caller goes on after the replicas' work (their results, updated variables):
  ``replicas_after_caller`` / ``caller_after_replicas``;
* at each meeting of the replicas (a collective: ``collectives.rendezvous``) the work every replica queued
  before it comes before the reduction, and the reduction before the work every replica queues after it:
  ``ready`` / ``wait``;
* a tensor made on one stream and freed after use on another is marked with ``record_stream``
  (``used_on``), or the caching allocator could hand out its memory while the other stream still reads it.

Every function takes ``None`` for a replica without a stream (CPU) and then does nothing. ``to_device`` is the
one copy between devices the library makes: asynchronous except into host memory, which the host reads at once
(a ``non_blocking`` copy from a GPU returns before the data has arrived).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device`` (itself if already there): ``non_blocking`` unless ``device`` is the CPU."""
    return tensor.to(device, non_blocking=torch.device(device).type != "cpu")


def replicas_after_caller(streams: Sequence[Any]) -> None:
    """Each replica's stream waits for the work the calling thread queued on its device."""
    for stream in streams:
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(stream.device))


def caller_after_replicas(streams: Sequence[Any]) -> None:
    """The calling thread's stream, on each replica's device, waits for that replica's work."""
    for stream in streams:
        if stream is not None:
            torch.cuda.current_stream(stream.device).wait_stream(stream)


def ready(stream: Any) -> Any:
    """An event marking the work queued on ``stream`` so far (None without a stream)."""
    if stream is None:
        return None
    event = torch.cuda.Event()
    event.record(stream)
    return event


def wait(stream: Any, events: Iterable[Any]) -> None:
    """Work queued on ``stream`` from now on runs after ``events`` (None entries skipped)."""
    if stream is None:
        return
    for event in events:
        if event is not None:
            stream.wait_event(event)


def used_on(stream: Any, value: Any) -> Any:
    """Mark every CUDA tensor in ``value`` (nested lists, tuples, dicts) as used on ``stream``; returns ``value``."""
    if stream is not None:
        _mark(stream, value)
    return value


def _mark(stream: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        if value.is_cuda and value.layout == torch.strided:   # (sparse gradients travel densely to meetings)
            value.record_stream(stream)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _mark(stream, item)
    elif isinstance(value, dict):
        for item in value.values():
            _mark(stream, item)


__all__ = ["to_device", "replicas_after_caller", "caller_after_replicas", "ready", "wait", "used_on"]
