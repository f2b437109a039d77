"""Naming the culprit when a cross-process collective fails (a peer died, hung, or failed itself).

On failure a process posts ``failed/<rank>`` to the rendezvous store, closes its connections (so
peers blocked on it notice at once) and waits briefly for the other ranks' posts. Ranks that post
nothing are missing: dead (connection lost) or hung (timeout). If rank 0, which hosts the store,
is unreachable, it is the one named. Store values are plain ASCII text, never unpickled.

Every store call here runs under a deadline of its own (``_bounded``): a paused store host keeps
its sockets open but never answers, and the store's own timeout does not cover a reply that never
comes, so without it every survivor would wait forever in its failure report.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from collections.abc import Callable

import torch.distributed as dist

from multidev._core.errors import AbortedError, DeadlineExceededError, OpError, UnavailableError
from multidev.collectives.process_world import ProcessWorld

_POLL_SECONDS = 0.05
_MAX_GRACE_SECONDS = 3.0
_UNANSWERED = object()


def _bounded(fn: Callable[[], object], seconds: float) -> object:
    """``fn()``, or ``_UNANSWERED`` if it raised or did not return within ``seconds``.

    It runs in a daemon thread, which is left blocked if the store never answers (the process is
    about to raise, and a blocked socket read cannot be interrupted from Python).
    """
    box: list = [_UNANSWERED]

    def call() -> None:
        try:
            box[0] = fn()
        except Exception:
            pass

    t = threading.Thread(target=call, name="multidev-failure-report", daemon=True)
    t.start()
    t.join(seconds)
    return box[0]


def is_timeout(err: BaseException) -> bool:
    """Whether the backend gave up waiting (as opposed to losing a connection)."""
    text = str(err).lower()
    return "timed out" in text or "timeout" in text


def first_line(err: BaseException) -> str:
    """The gist of a backend error: first line, without Gloo's source-path prefix and generic advice."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else type(err).__name__
    text = re.sub(r"^\[[^\]]*\.(cc|cpp|h|hpp):\d+\]\s*", "", text)
    return text.split(" This is typically caused", 1)[0]


class FailureReport:
    """Posts this rank's failure and finds which peers did not post theirs."""

    def __init__(self, store: dist.Store, world: ProcessWorld, prefix: str, timeout_s: float):
        self._store = store
        self._world = world
        self._prefix = prefix
        self._grace = min(_MAX_GRACE_SECONDS, timeout_s)

    def _key(self, rank: int) -> str:
        return f"{self._prefix}/failed/{rank}"

    def post(self, call: str) -> bool:
        """Record that this rank failed at ``call``; False when the store is unreachable or silent."""
        def set_key() -> bool:
            self._store.set_timeout(datetime.timedelta(seconds=self._grace))
            self._store.set(self._key(self._world.rank), call)
            return True

        return _bounded(set_key, self._grace) is True

    def absent_peers(self) -> list[int] | None:
        """Peers that posted no failure within the grace period (None: the store became unreachable)."""
        # Bounded from outside too: a store whose host was cut off the network can block a client
        # call far beyond the store's timeout (the client keeps retrying the connection).
        absent = _bounded(self._absent_peers, self._grace + 3.0)
        return None if absent is _UNANSWERED else absent

    def _absent_peers(self) -> list[int] | None:
        peers = [r for r in range(self._world.world_size) if r != self._world.rank]
        deadline = time.monotonic() + self._grace
        while True:
            absent = _bounded(lambda: [r for r in peers if not self._store.check([self._key(r)])], self._grace)
            if absent is _UNANSWERED:
                return None
            if not absent or time.monotonic() > deadline:
                return absent
            time.sleep(_POLL_SECONDS)

    def peer_calls(self, ranks: list[int]) -> list[str]:
        """What the given peers reported (``worker 0 (addr) failed at all_reduce #3``)."""
        out = []
        for r in ranks:
            raw = _bounded(lambda key=self._key(r): self._store.get(key), self._grace)
            call = "an unknown call" if raw is _UNANSWERED else raw.decode("ascii", "replace")
            out.append(f"{self._world.describe(r)} failed at {call}")
        return out


def diagnose(report: FailureReport, world: ProcessWorld, call: str, err: BaseException, timeout_s: float,
             close_connections: Callable[[], None]) -> OpError:
    """The error to raise for a failed ``call`` (``all_reduce #17``), naming the missing workers."""
    me = world.describe(world.rank)
    posted = report.post(call)
    close_connections()
    absent = report.absent_peers() if posted else None
    detail = first_line(err)
    if absent is None and is_timeout(err):
        return DeadlineExceededError(
            f"{world.describe(0)}, which hosts the job's rendezvous, did not answer: {call} timed out after "
            f"{timeout_s:g} s on {me} ({detail}). It is hung (paused, stuck, or much slower than the others); "
            "check its log, or raise CommunicationOptions(timeout_seconds=...) / MULTIDEV_COLLECTIVE_TIMEOUT."
        )
    if absent is None:
        where = (f"The job's rendezvous at {world.store_host}:{world.store_port} (hosted by the launcher's agent)"
                 if world.store_is_external else f"{world.describe(0)}, which hosts the job's rendezvous,")
        return UnavailableError(
            f"{where} is unreachable: {call} failed on {me} ({detail}). It probably exited or crashed, or "
            "its host is cut off; check its log."
        )
    if absent and is_timeout(err):
        return DeadlineExceededError(
            f"{world.describe_ranks(absent)} did not reach {call} within {timeout_s:g} s (seen from {me}). "
            "It is hung, much slower than the others, or issues different collectives; check its log, or "
            "raise CommunicationOptions(timeout_seconds=...) / MULTIDEV_COLLECTIVE_TIMEOUT."
        )
    if absent:
        return UnavailableError(
            f"{world.describe_ranks(absent)} left the job during {call} (connection lost, seen from {me}): "
            f"it probably crashed or was killed; check its log. ({detail})"
        )
    peers = [r for r in range(world.world_size) if r != world.rank]
    return AbortedError(
        f"{call} failed on {me} because its peers failed too: {'; '.join(report.peer_calls(peers))}. ({detail})"
    )


__all__ = ["FailureReport", "diagnose", "is_timeout", "first_line"]
