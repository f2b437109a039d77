"""Long-lived replica threads: with several replicas each runs in its own thread (as in
TensorFlow's MirroredStrategy) while the caller waits.

Replica 0 does not run in the caller's thread: on Linux the main thread allocates from glibc's
main arena, which gives freed memory back to the OS and page-faults it in again every step
(thousands of faults for a few MB of gradients), so a replica there ran measurably slower than
the others and every collective waited for it.

Threads are created once per strategy (not per step) and stop when the strategy is garbage
collected: a thread drops its task (whose closure holds the strategy) as soon as it has run it.
A task is a zero-argument callable; its result or exception comes back to the caller.

Faults never hang the caller:

* The replica threads record their results in a ``_Run`` themselves, so an interrupt (Ctrl-C)
  landing anywhere in the caller loses nothing; the caller then aborts the replicas' collectives,
  waits a few seconds for them and re-raises.
* Once a replica has failed, the others get ``SETTLE_SECONDS`` to return (those waiting in a
  collective are woken by the abort); one still busy after that (hung in its own code) is left
  behind and ``run`` raises the failure without it.
* A replica left behind would join the next run's collectives, so the next ``run`` waits for it
  (up to ``busy_wait_s``) and otherwise refuses with an error naming it.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from typing import Any, Callable, Sequence

from multidev._core.errors import AbortedError

_STOP = object()
SETTLE_SECONDS = 2.0       # after a replica failed, how long the others may take to return
INTERRUPT_SECONDS = 5.0    # after Ctrl-C, how long the caller waits for the replicas to stop
_POLL_SECONDS = 0.2        # the caller's waits are sliced so that signals are handled promptly


class _Run:
    """One ``run``'s outcomes, filled in by the replica threads.

    The caller never holds a condition variable: an interrupt inside ``Condition.wait`` can leave
    its lock released and turn Ctrl-C into "cannot release un-acquired lock". It polls a queue
    the replicas post to instead, and reads the state under a plain lock held for a few lines.
    """

    def __init__(self, num_replicas: int):
        self.results: list[tuple[bool, Any]] = [(False, None)] * num_replicas
        self.busy = set(range(num_replicas))
        self.failed_at: float | None = None
        self._claimed: set[int] = set()
        self._cancelled = False
        self._lock = threading.Lock()
        self._wakeups: queue.SimpleQueue = queue.SimpleQueue()

    def claim(self, replica_id: int) -> bool:
        """Whether the replica should run its task: once, and not after the run was cancelled."""
        with self._lock:
            if replica_id in self._claimed:
                return False
            self._claimed.add(replica_id)
            if not self._cancelled:
                return True
        self.deliver(replica_id, False, AbortedError("strategy.run was interrupted before this replica started."))
        return False

    def cancel(self) -> None:
        """Replicas that did not start yet deliver without running their task."""
        with self._lock:
            self._cancelled = True

    def deliver(self, replica_id: int, ok: bool, value: Any) -> None:
        with self._lock:
            self.results[replica_id] = (ok, value)
            self.busy.discard(replica_id)
            if not ok and self.failed_at is None:
                self.failed_at = time.monotonic()
        self._wakeups.put(None)

    def snapshot(self) -> tuple[list[tuple[bool, Any]], set[int]]:
        """The outcomes so far and the replicas still busy, read together."""
        with self._lock:
            return list(self.results), set(self.busy)

    def wait(self, timeout: float | None = None, settle: float | None = None) -> bool:
        """Wait until every replica delivered (True); False once ``timeout`` passed, or ``settle``
        seconds after the first failure."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                busy, failed_at = bool(self.busy), self.failed_at
            if not busy:
                return True
            now = time.monotonic()
            limits = [t for t in (deadline, None if settle is None or failed_at is None else failed_at + settle)
                      if t is not None]
            if limits and now >= min(limits):
                return False
            try:
                self._wakeups.get(timeout=min([_POLL_SECONDS] + [t - now for t in limits]))
            except queue.Empty:
                pass


def _worker(inbox: queue.SimpleQueue, replica_id: int) -> None:
    while True:
        item = inbox.get()
        if item is _STOP:
            return
        run, task = item
        outcome = None
        if run.claim(replica_id):
            try:
                outcome = (True, task())
            except BaseException as exc:  # delivered to the caller, which re-raises it
                outcome = (False, exc)
            run.deliver(replica_id, *outcome)
        # Drop the last task now: its closure holds the replica context and so the strategy, which
        # would otherwise stay alive (with these threads) until the next task arrives: forever.
        del item, run, task, outcome


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

    def __init__(self, num_replicas: int, name: str, on_interrupt: Callable[[BaseException], None],
                 busy_wait_s: float = 30.0):
        self._inboxes = [queue.SimpleQueue() for _ in range(num_replicas)]
        self._on_interrupt = on_interrupt
        self._busy_wait_s = busy_wait_s
        self._left_behind: _Run | None = None  # a run whose replicas did not all return
        self._threads = []
        for r, inbox in enumerate(self._inboxes):
            t = threading.Thread(target=_worker, args=(inbox, r), name=f"{name}-replica-{r}", daemon=True)
            t.start()
            self._threads.append(t)
        self._finalizer = weakref.finalize(self, _stop, self._inboxes)
        _live.add(self)

    def run(self, tasks: Sequence[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        self.wait_idle()
        run = _Run(len(tasks))
        self._left_behind = run  # until every replica returned, whatever interrupts the caller
        handed = 0
        try:
            for inbox, task in zip(self._inboxes, tasks):
                inbox.put((run, task))
                handed += 1
            done = run.wait(settle=SETTLE_SECONDS)
        except BaseException as interrupt:  # KeyboardInterrupt while the replicas run
            self._interrupted(run, interrupt, tasks, handed)
            raise
        if not done:  # a replica failed and another is still busy: raise without it
            results, busy = run.snapshot()
            return [(False, _left_behind_error(r, SETTLE_SECONDS)) if r in busy else outcome
                    for r, outcome in enumerate(results)]
        self._left_behind = None
        return run.results

    def _interrupted(self, run: _Run, interrupt: BaseException, tasks: Sequence[Callable[[], Any]],
                     handed: int) -> None:
        """Stop every replica at its next collective and wait a few seconds for them (a second
        interrupt stops the wait); the next ``run`` waits for any still busy."""
        run.cancel()
        for inbox, task in list(zip(self._inboxes, tasks))[handed:]:  # maybe handed twice: claimed once
            inbox.put((run, task))
        self._on_interrupt(interrupt)
        try:
            run.wait(timeout=INTERRUPT_SECONDS)
        except BaseException:
            pass

    def wait_idle(self) -> None:
        """Wait for replicas still running an earlier failed or interrupted run (up to ``busy_wait_s``);
        raise naming them if they do not return. Call it before the next run's rendezvous starts."""
        run = self._left_behind
        if run is None:
            return
        if not run.wait(timeout=self._busy_wait_s):
            raise RuntimeError(
                f"Replica(s) {sorted(run.busy)} of an earlier strategy.run that failed or was interrupted "
                f"are still running their function after {self._busy_wait_s:g} s more; this strategy "
                "cannot run again until they return (they would join this run's collectives). Find "
                "why they hang (a loop or a blocking call in the replica function), or create a new strategy."
            )
        self._left_behind = None

    def close(self) -> None:
        """Stop the threads now (they also stop when the strategy is garbage collected)."""
        self._finalizer()
        for t in self._threads:
            t.join(timeout=5)


def _left_behind_error(replica_id: int, settle: float) -> AbortedError:
    return AbortedError(
        f"Replica {replica_id} was still running {settle:g} s after another replica failed; "
        "strategy.run raised without waiting for it."
    )
