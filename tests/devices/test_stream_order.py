"""The CUDA stream protocol of replicas, checked on any machine with recording stand-ins for streams and events
(``devices/stream_order.py``; the H200 run of issue 28 is where unordered streams would read half-written data)."""

from __future__ import annotations

import threading

import torch

from multidev.collectives.rendezvous import Rendezvous
from multidev.devices import stream_order


class _Recorder:
    def __init__(self):
        self.calls = []
        self._lock = threading.Lock()
        self._events = 0

    def ready(self, stream):
        with self._lock:
            self._events += 1
            event = f"event{self._events}@{stream}"
            self.calls.append(("ready", stream, event))
            return event

    def wait(self, stream, events):
        with self._lock:
            self.calls.append(("wait", stream, tuple(events)))

    def used_on(self, stream, value):
        with self._lock:
            self.calls.append(("used_on", stream, value))
        return value


def test_a_meeting_orders_every_replicas_work_before_the_combination_and_the_combination_before_theirs(monkeypatch):
    rec = _Recorder()
    for name in ("ready", "wait", "used_on"):
        monkeypatch.setattr(stream_order, name, getattr(rec, name))
    meeting = Rendezvous(2, timeout=10, streams=["s0", "s1"])
    combined_on = []

    def combine(payloads):
        combined_on.append([c for c in rec.calls])   # what had been ordered when the combination ran
        return [sum(payloads)] * 2

    results = [None, None]

    def replica(r):
        if r == 1:   # arrive second, once replica 0 waits in the meeting: replica 1 combines
            while meeting._arrived == 0:
                threading.Event().wait(0.01)
        results[r] = meeting.exchange(r, ("sum",), r + 1, combine)

    threads = [threading.Thread(target=replica, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [3, 3]
    readies = {}
    for kind, stream, event in rec.calls:
        if kind == "ready":
            readies.setdefault(stream, event)   # each replica's arrival (the combiner's second: the combination)
    # replica 1 came last and combined: on its stream it first waited for both replicas' work
    before = combined_on[0]
    assert ("wait", "s1", (readies["s0"], readies["s1"])) in before
    combined = [c[2] for c in rec.calls if c[0] == "ready"][-1]
    assert combined.endswith("@s1")
    # replica 0 waited for the combination on its own stream, and marked the result as used there
    assert ("wait", "s0", (combined,)) in rec.calls
    assert ("used_on", "s0", 3) in rec.calls


def test_replicas_without_streams_skip_the_protocol(monkeypatch):
    def refuse(*args):
        raise AssertionError("a CPU meeting touched stream_order")
    for name in ("ready", "wait", "used_on"):
        monkeypatch.setattr(stream_order, name, refuse)
    meeting = Rendezvous(2, timeout=10, streams=[None, None])
    out = [None, None]
    threads = [threading.Thread(target=lambda r=r: out.__setitem__(r, meeting.share(r, ("x",), r))) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == [[0, 1], [0, 1]]


def test_copies_into_host_memory_block_and_others_do_not():
    class Tensor:
        def to(self, device, non_blocking=False):
            return (str(device), non_blocking)

    assert stream_order.to_device(Tensor(), torch.device("cpu")) == ("cpu", False)
    assert stream_order.to_device(Tensor(), "cpu") == ("cpu", False)
    assert stream_order.to_device(Tensor(), torch.device("cuda", 1)) == ("cuda:1", True)
    assert stream_order.to_device(Tensor(), "meta") == ("meta", True)
    assert stream_order.used_on(None, [1]) == [1]
