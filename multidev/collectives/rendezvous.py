"""Meeting point of the replica threads of one strategy: each collective is a rendezvous.

Every replica calls ``exchange`` with its contribution; the last to arrive checks that all
replicas called the same collective with compatible arguments, combines the contributions once,
and wakes the others with their share of the result. Mistakes fail fast instead of hanging:

* replicas reaching different collectives (different order, names or shapes) -> ``CollectiveMismatchError``
  naming the call on each replica;
* a replica that returned from its function while others wait, or raised -> ``AbortedError``;
* nobody arriving within ``timeout`` seconds -> ``DeadlineExceededError`` naming the missing replicas.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from multidev._core.errors import AbortedError, DeadlineExceededError, InvalidArgumentError
from multidev.devices import stream_order


class CollectiveMismatchError(InvalidArgumentError):
    """Replicas called different collectives, or the same one with incompatible arguments."""


class Rendezvous:
    """Synchronises ``num_replicas`` threads at each collective call of one ``strategy.run``."""

    def __init__(self, num_replicas: int, timeout: float, streams: Sequence[Any] | None = None):
        self._n = num_replicas
        self._timeout = timeout
        # Each replica's CUDA stream (None for CPU): a meeting orders their work (``stream_order``).
        self._streams = list(streams) if streams is not None and any(s is not None for s in streams) else None
        # ``with self._lock`` (a C lock: its ``__enter__`` is no Python code), never ``with self._cond``: the caller's
        # thread resets and aborts the meeting, and a Ctrl-C landing inside ``Condition.__enter__`` (Python) after
        # it took the lock left the lock held for good; the next run's replicas hung at their first collective.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self.reset()

    @property
    def timeout(self) -> float:
        """Seconds a replica waits for the others at a collective."""
        return self._timeout

    def reset(self) -> None:
        """Start a new ``strategy.run``: forget calls, errors and finished replicas."""
        with self._lock:
            self._slots: list[Any] = [None] * self._n
            self._arrived = 0
            self._generation = 0
            self._results: Sequence[Any] = ()
            self._combined: Any = None   # the event after the last combine's work (GPU replicas)
            self._error: BaseException | None = None
            self._finished: set[int] = set()
            self._calls = [0] * self._n

    def exchange(self, replica_id: int, signature: tuple, payload: Any,
                 combine: Callable[[list], Sequence[Any]]) -> Any:
        """Contribute ``payload``; returns ``combine(payloads)[replica_id]`` once all replicas came.

        ``signature`` is ``(name, detail...)``: it must be equal on every replica.
        """
        stream = self._streams[replica_id] if self._streams is not None else None
        ready = stream_order.ready(stream) if stream is not None else None
        with self._lock:
            self._raise_if_failed()
            call_number = self._calls[replica_id]
            self._calls[replica_id] += 1
            self._slots[replica_id] = (call_number, signature, payload, ready)
            self._arrived += 1
            generation = self._generation
            if self._arrived == self._n:
                return self._complete(replica_id, combine, stream)
            if self._finished:
                self._fail(self._left_early_error())
                self._raise_if_failed()
            if not self._cond.wait_for(lambda: self._generation != generation or self._error is not None,
                                       timeout=self._timeout):
                self._fail(self._timeout_error(signature, call_number))
            if self._generation != generation:
                if stream is None:
                    return self._results[replica_id]
                stream_order.wait(stream, (self._combined,))
                return stream_order.used_on(stream, self._results[replica_id])
            self._raise_if_failed()
            raise AssertionError("unreachable")  # pragma: no cover

    def share(self, replica_id: int, signature: tuple, payload: Any) -> list:
        """Every replica's ``payload`` in replica order, returned on every replica."""
        return self.exchange(replica_id, signature, payload, _everyone)

    def barrier(self, replica_id: int, name: str) -> None:
        """Wait until every replica reached this point (nothing to wait for with one replica)."""
        if self._n > 1:
            self.exchange(replica_id, ("barrier", name), None, _nothing)

    def replica_finished(self, replica_id: int) -> None:
        """Called when a replica's function returned: replicas waiting for it must not hang."""
        with self._lock:
            self._finished.add(replica_id)
            if self._arrived and self._error is None:
                self._fail(self._left_early_error())

    def abort(self, error: BaseException) -> None:
        """A replica raised: wake every waiting replica with an ``AbortedError``."""
        with self._lock:
            if self._error is None:
                self._fail(AbortedError(f"A replica failed ({type(error).__name__}: {error}); collective aborted."))

    # --- internals (hold self._cond) ---------------------------------------------------------
    def _complete(self, replica_id: int, combine, stream: Any) -> Any:
        signatures = [s[1] for s in self._slots]
        numbers = [s[0] for s in self._slots]
        if any(sig != signatures[0] for sig in signatures) or len(set(numbers)) != 1:
            calls = "; ".join(f"replica {r}: call #{numbers[r]} {_describe(signatures[r])}" for r in range(self._n))
            self._fail(CollectiveMismatchError(
                f"Replicas reached different collectives: {calls}. Every replica must call the same "
                "collectives in the same order with the same shapes and dtypes."
            ))
            self._raise_if_failed()
        payloads = [s[2] for s in self._slots]
        if stream is not None:
            stream_order.wait(stream, [s[3] for s in self._slots])
        try:
            results = combine(payloads)
        except BaseException as exc:
            self._fail(exc)
            raise
        if stream is not None:
            self._combined = stream_order.ready(stream)
        self._results = results
        self._slots = [None] * self._n
        self._arrived = 0
        self._generation += 1
        self._cond.notify_all()
        return results[replica_id]

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._cond.notify_all()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _waiting(self) -> list[int]:
        return [r for r in range(self._n) if self._slots[r] is not None]

    def _left_early_error(self) -> AbortedError:
        waiting = self._waiting()
        r = waiting[0]
        number, signature, _, _ = self._slots[r]
        return AbortedError(
            f"Replica(s) {sorted(self._finished)} returned from the replica function while replica(s) "
            f"{waiting} wait in call #{number} {_describe(signature)}. Every replica must make the same "
            "collective calls (check for replica-dependent branches around all_reduce/merge_call)."
            + (_BACKWARD_HINT if signature[0] == "loss.backward" else "")
        )

    def _timeout_error(self, signature: tuple, number: int) -> DeadlineExceededError:
        missing = [r for r in range(self._n) if self._slots[r] is None]
        return DeadlineExceededError(
            f"Replica(s) {missing} did not reach call #{number} {_describe(signature)} within "
            f"{self._timeout:g} s; replica(s) {self._waiting()} waited for them. Raise the limit with "
            "MULTIDEV_COLLECTIVE_TIMEOUT if a replica legitimately runs that long."
        )


# loss.backward() reduces the gradients of every mirrored variable it reaches, as DDP's reducer does.
_BACKWARD_HINT = (
    " loss.backward() over variables built in the strategy's scope reduces their gradients across replicas, "
    "so every replica must call it, as every DDP rank of a wrapped model must: a backward that only some "
    "replicas run (an attack's input gradient skipped with `continue`, FGSM's `data.grad`) can take "
    "`torch.autograd.grad(loss, data)`, which reduces nothing, or run with the model's parameters frozen "
    "(`model.requires_grad_(False)`); or let every replica call backward and mask what it skips.")


def _describe(signature: tuple) -> str:
    name, *detail = signature
    return f"{name}({', '.join(str(d) for d in detail)})"


def _everyone(payloads: list) -> list:
    return [payloads] * len(payloads)


def _nothing(payloads: list) -> list:
    return [None] * len(payloads)
