"""Long-lived replica threads: with several replicas each runs in its own thread (as in
TensorFlow's MirroredStrategy) while the caller waits.

Replica 0 does not run in the caller's thread: on Linux the main thread allocates from glibc's
main arena, which gives freed memory back to the OS and page-faults it in again every step
(thousands of faults for a few MB of gradients), so a replica there ran measurably slower than
the others and every collective waited for it.

Threads are created once per strategy (not per step) and stop when the strategy is garbage
collected. A task is a zero-argument callable; its result or exception comes back to the caller.
"""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from typing import Any, Callable, Sequence

_STOP = object()


def _worker(inbox: queue.SimpleQueue, outbox: queue.SimpleQueue, replica_id: int) -> None:
    while True:
        task = inbox.get()
        if task is _STOP:
            return
        try:
            outbox.put((replica_id, True, task()))
        except BaseException as exc:  # delivered to the caller, which re-raises it
            outbox.put((replica_id, False, exc))


def _stop(inboxes: Sequence[queue.SimpleQueue]) -> None:
    for inbox in inboxes:
        inbox.put(_STOP)


_live: "weakref.WeakSet[ReplicaThreads]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    # Joining before interpreter teardown: a daemon thread killed while torch holds
    # thread-local C++ state aborts the process ("terminate called without an active exception").
    for threads in list(_live):
        threads.close()


class ReplicaThreads:
    """Runs one task per replica concurrently and returns ``(ok, value)`` per replica."""

    def __init__(self, num_replicas: int, name: str, on_interrupt: Callable[[BaseException], None]):
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._inboxes = [queue.SimpleQueue() for _ in range(num_replicas)]
        self._on_interrupt = on_interrupt
        self.broken = False
        self._threads = []
        for r, inbox in enumerate(self._inboxes):
            t = threading.Thread(target=_worker, args=(inbox, self._outbox, r), name=f"{name}-replica-{r}", daemon=True)
            t.start()
            self._threads.append(t)
        self._finalizer = weakref.finalize(self, _stop, self._inboxes)
        _live.add(self)

    def run(self, tasks: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        if self.broken:
            raise RuntimeError("This strategy's replicas were interrupted twice while running and may still be "
                               "busy; create a new strategy to run again.")
        for inbox, task in zip(self._inboxes, tasks):
            inbox.put(task)
        results: list[tuple[bool, Any]] = [(False, None)] * len(tasks)
        waiting = len(tasks)
        try:
            while waiting:
                r, ok, value = self._outbox.get()
                results[r] = (ok, value)
                waiting -= 1
        except BaseException as interrupt:  # KeyboardInterrupt while the replicas run
            # Stop every replica at its next collective, and wait for all of them so the next run
            # starts clean; a second interrupt abandons them.
            self._on_interrupt(interrupt)
            try:
                while waiting:
                    self._outbox.get()
                    waiting -= 1
            except BaseException:
                self.broken = True
                self._finalizer()
            raise
        return results

    def close(self) -> None:
        """Stop the threads now (they also stop when the strategy is garbage collected)."""
        self._finalizer()
        for t in self._threads:
            t.join(timeout=5)
