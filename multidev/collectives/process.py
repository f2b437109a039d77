"""``ProcessCollective``: all-reduce (one tensor or a batch), all-gather, broadcast and barrier across processes.

One object per process over a torch.distributed backend (Gloo on CPUs, NCCL on GPUs) that it
creates itself with a bounded timeout. Each call first all-gathers a small fingerprint of the call
(see ``fingerprint``) and compares them before any data moves, so workers that disagree fail at
once with an error naming each worker's call; a dead or hung peer fails the call within the
timeout with an error naming it (see ``process_failure``). Only plain tensors travel: nothing received is unpickled. A one-process world
runs no network at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
import torch.distributed as dist

from multidev._core.enums import ReduceOp
from multidev._core.errors import FailedPreconditionError, InvalidArgumentError, OpError
from multidev.collectives import fingerprint
from multidev.collectives.algorithms import divide_
from multidev.collectives.process_config import fingerprints_enabled, resolve_timeout
from multidev.collectives.process_failure import FailureReport, diagnose
from multidev.collectives.process_gpus import choose_backend, post_gpus, shared_gpus, wait_until_all_read
from multidev.collectives.process_hosts import post_host, with_hosts
from multidev.collectives.process_pending import PendingCollective
from multidev.collectives.process_queue import OrderedQueue
from multidev.collectives.process_rendezvous import create_backend, join, open_store
from multidev.collectives.process_world import ProcessWorld

_generations = itertools.count()  # same order of creation on every rank -> same store namespace
_BACKENDS = ("gloo", "nccl", "auto")


class ProcessCollective:
    """Collectives on one tensor per process, across the processes of a ``ProcessWorld``.

    Args:
        world: the processes and this one's rank (``collective_world(resolver)`` builds it).
        backend: ``"gloo"`` (CPU tensors), ``"nccl"`` (CUDA tensors) or ``"auto"`` (CUDA tensors: NCCL,
            or Gloo when processes share a GPU, see ``process_gpus``).
        gpus: identities of the GPUs this process computes on (``process_gpus.gpu_identity``), which
            ``"nccl"`` and ``"auto"`` compare across processes before the backend is made.
        timeout_seconds: bound on the rendezvous and on every collective (None: 30 s or
            ``MULTIDEV_COLLECTIVE_TIMEOUT``).
        check_fingerprints: verify before each call that all processes make the same call
            (None: on unless ``MULTIDEV_COLLECTIVE_FINGERPRINTS=0``). Off saves one small round
            trip per call, but then a mismatch hangs until the timeout or, worse, gives a wrong
            result without any error (tensors of the same element count and another shape are
            combined element by element in memory order); a warning says so once per process.

    Calls must come from one thread at a time, in the same order on every process (the
    strategy's cross-replica step, after the in-process reduction).

    Example:
        >>> collective = ProcessCollective(collective_world(TFConfigClusterResolver()))  # doctest: +SKIP
        >>> grads = torch.ones(10)
        >>> collective.all_reduce(grads, ReduceOp.MEAN)                                   # doctest: +SKIP
        >>> collective.shutdown()                                                         # doctest: +SKIP
    """

    def __init__(self, world: ProcessWorld, *, backend: str = "gloo", timeout_seconds: float | None = None,
                 check_fingerprints: bool | None = None, gpus: Sequence[str] = ()):
        if backend not in _BACKENDS:
            raise ValueError(f"Unknown backend {backend!r}: expected one of {list(_BACKENDS)}.")
        self.world = world
        self.backend_name = "nccl" if backend == "auto" else backend   # "auto" is settled once all have joined
        self._requested = backend
        self._gpus = tuple(gpus)
        self.timeout_seconds = resolve_timeout(timeout_seconds)
        self.check_fingerprints = fingerprints_enabled() if check_fingerprints is None else bool(check_fingerprints)
        if not self.check_fingerprints:
            fingerprint.warn_unchecked()
        self._seq = 0
        self._closed = False
        self._broken: OpError | None = None
        self._backend = None
        self._control = None
        self._store = None
        self._prefix = f"{world.key_prefix}/{next(_generations)}"
        self._queue = OrderedQueue()
        if world.world_size > 1:
            self._connect()

    def _connect(self) -> None:
        self._store = open_store(self.world, self.timeout_seconds)
        try:
            # join admits only holders of the job secret; our own records then go through the
            # signed session. torch's backends keep the plain store (a Python store in Gloo stops
            # its timeouts from firing), see docs/multi_worker.md on what the secret protects.
            session = join(self._store, self.world, self._prefix, self.timeout_seconds, before_join=self._post)
            self.world = with_hosts(session, self.world, self._prefix)
            if self._requested != "gloo":
                shared = shared_gpus(session, self.world, self._prefix)
                try:
                    self.backend_name = choose_backend(self._requested, shared, self.world)
                except FailedPreconditionError:   # every rank refuses alike; none may lose the store first
                    wait_until_all_read(session, self.world, self._prefix, self.timeout_seconds)
                    raise
            self._backend = create_backend(self._store, self.world, self.backend_name, self._prefix, self.timeout_seconds)
            # Fingerprints and barriers always travel on Gloo (CPU, bounded waits, our error messages);
            # with NCCL the data group is separate and only ever sees calls that all processes agree on.
            self._control = self._backend if self.backend_name == "gloo" else create_backend(
                self._store, self.world, "gloo", self._prefix + "/control", self.timeout_seconds)
        except BaseException:
            self._store = None
            raise
        self._store = session
        self._report = FailureReport(self._store, self.world, self._prefix, self.timeout_seconds)

    def _post(self, signed) -> None:
        """What every rank reads of this one once all have joined: its host, and its GPUs."""
        post_host(signed, self.world, self._prefix)
        post_gpus(signed, self.world, self._prefix, self._gpus)

    # -- public API -------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.world.rank

    @property
    def world_size(self) -> int:
        """Number of processes."""
        return self.world.world_size

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp | str = ReduceOp.SUM) -> torch.Tensor:
        """Replace ``tensor`` (in place) by the SUM or MEAN of its values on every process; returns it.

        Example:
            >>> grads = torch.full((4,), float(collective.rank))  # doctest: +SKIP
            >>> collective.all_reduce(grads, ReduceOp.MEAN)        # doctest: +SKIP
            tensor([0.5000, 0.5000, 0.5000, 0.5000])
        """
        return self._all_reduce(tensor, op, asynchronous=False).wait()

    def all_reduce_async(self, tensor: torch.Tensor, op: ReduceOp | str = ReduceOp.SUM) -> PendingCollective:
        """Start ``all_reduce`` and return at once; ``.wait()`` finishes it (one bucket during backward).

        The fingerprint check and the start of the transfer happen on a helper thread, in call order.
        """
        return self._all_reduce(tensor, op, asynchronous=True)

    def _all_reduce(self, tensor: torch.Tensor, op: ReduceOp | str, asynchronous: bool) -> PendingCollective:
        op = ReduceOp.from_value(op)
        seq = self._next_call()
        if self.world_size == 1:
            return PendingCollective(None, lambda: tensor)
        row = fingerprint.encode(seq, "all_reduce", tensor, fingerprint.REDUCE_OP_NAMES.index(op.name))
        return self._reduce_in_place([tensor], op, row, asynchronous, lambda tensors: tensors[0])

    def batch_all_reduce(self, tensors: Sequence[torch.Tensor], op: ReduceOp | str = ReduceOp.SUM) -> list[torch.Tensor]:
        """``all_reduce`` of several tensors (in place) with one fingerprint check for all of them.

        Example:
            >>> collective.batch_all_reduce([bucket0, bucket1], ReduceOp.SUM)  # doctest: +SKIP
        """
        return self._batch_all_reduce(tensors, op, asynchronous=False).wait()

    def batch_all_reduce_async(self, tensors: Sequence[torch.Tensor], op: ReduceOp | str = ReduceOp.SUM) -> PendingCollective:
        """Start ``batch_all_reduce``; ``.wait()`` finishes it and returns the tensors."""
        return self._batch_all_reduce(tensors, op, asynchronous=True)

    def _batch_all_reduce(self, tensors: Sequence[torch.Tensor], op: ReduceOp | str, asynchronous: bool) -> PendingCollective:
        op = ReduceOp.from_value(op)
        tensors = list(tensors)
        seq = self._next_call()
        if self.world_size == 1 or not tensors:
            return PendingCollective(None, lambda: tensors)
        row = fingerprint.encode_batch(seq, "batch_all_reduce", tensors, fingerprint.REDUCE_OP_NAMES.index(op.name))
        return self._reduce_in_place(tensors, op, row, asynchronous, lambda tensors: tensors)

    def _reduce_in_place(self, tensors: list, op: ReduceOp, row: list[int], asynchronous: bool,
                         result) -> PendingCollective:
        """All-reduce ``tensors`` in place (through contiguous buffers where needed); ``result``
        picks what ``wait()`` returns from the finished tensors."""
        bufs = [t if t.is_contiguous() else t.contiguous() for t in tensors]

        def finish():
            for t, b in zip(tensors, bufs):
                if b is not t:
                    t.copy_(b)
                if op is ReduceOp.MEAN:
                    divide_(t, self.world_size)
            return result(tensors)

        def start_data():
            works = [self._backend.allreduce([b]) for b in bufs]
            return works[0] if len(works) == 1 else _WorkGroup(works)

        return self._launch(row, start_data, finish, asynchronous)

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every process's ``tensor``, in rank order; first dimensions may differ across processes."""
        seq = self._next_call()
        if self.world_size == 1:
            return [tensor.clone()]
        row = fingerprint.encode(seq, "all_gather", tensor)
        flat = tensor.reshape(1) if tensor.dim() == 0 else tensor

        def start():
            rows = self._exchange(row)
            self._check_rows(rows)
            sizes = fingerprint.first_dims(rows)
            padded = _pad_rows(flat.contiguous(), max(sizes))
            out = [torch.empty_like(padded) for _ in sizes]
            work = self._start(row, lambda: self._backend.allgather([out], [padded])) if max(sizes) else None
            return work, out, sizes

        work, out, sizes = self._queue.run(start)
        if work is not None:
            self._wait(row, work)
        gathered = [o[:n] for o, n in zip(out, sizes)]
        return [g.reshape(()) for g in gathered] if tensor.dim() == 0 else gathered

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Overwrite ``tensor`` (in place) on every process with the value of process ``src``; returns it."""
        return self._broadcast(tensor, src, asynchronous=False).wait()

    def broadcast_async(self, tensor: torch.Tensor, src: int = 0) -> PendingCollective:
        """Start ``broadcast`` and return at once; ``.wait()`` finishes it."""
        return self._broadcast(tensor, src, asynchronous=True)

    def _broadcast(self, tensor: torch.Tensor, src: int, asynchronous: bool) -> PendingCollective:
        if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < self.world_size:
            raise ValueError(f"broadcast src {src!r} is not a rank: expected 0..{self.world_size - 1}.")
        seq = self._next_call()
        if self.world_size == 1:
            return PendingCollective(None, lambda: tensor)
        buf = tensor if tensor.is_contiguous() else tensor.contiguous()
        options = dist.BroadcastOptions()
        options.rootRank = src
        options.rootTensor = 0

        def finish() -> torch.Tensor:
            if buf is not tensor:
                tensor.copy_(buf)
            return tensor

        row = fingerprint.encode(seq, "broadcast", tensor, src)
        return self._launch(row, lambda: self._backend.broadcast([buf], options), finish, asynchronous)

    def barrier(self) -> None:
        """Wait until every process reaches this barrier (bounded by the timeout)."""
        seq = self._next_call()
        if self.world_size > 1:
            row = fingerprint.encode(seq, "barrier")
            self._queue.run(lambda: self._check_rows(self._exchange(row)))

    def shutdown(self) -> None:
        """Close connections and the rendezvous; idempotent. Further calls raise."""
        self._queue.close()
        backends = {id(b): b for b in (self._backend, self._control) if b is not None}
        self._backend = self._control = None
        for backend in backends.values():
            try:
                backend.shutdown()
            except Exception:  # a broken group may refuse; its connections go with it anyway
                pass
        self._store = None
        self._closed = True

    def __enter__(self) -> "ProcessCollective":
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"ProcessCollective({self.world.describe(self.rank)}, rank={self.rank}/{self.world_size}, "
                f"backend={self.backend_name!r}, timeout_seconds={self.timeout_seconds:g})")

    @property
    def calls_made(self) -> int:
        """How many collectives this process has entered (every process enters the same ones, in order)."""
        return self._seq

    # -- internals --------------------------------------------------------------------------

    def _next_call(self) -> int:
        if self._closed:
            raise FailedPreconditionError("This ProcessCollective was shut down; create a new one to communicate again.")
        if self._broken is not None:
            raise type(self._broken)(f"The collective group is unusable after an earlier failure: {self._broken}")
        self._seq += 1
        return self._seq

    def _exchange(self, row: list[int]) -> list[list[int]]:
        """All-gather the fingerprint rows (one tiny round trip); returns them in rank order."""
        send = torch.tensor(row, dtype=torch.int64)
        recv = torch.empty(self.world_size * fingerprint.FIELDS, dtype=torch.int64)
        self._wait(row, self._start(row, lambda: self._control._allgather_base(recv, send)))
        flat, n = recv.tolist(), fingerprint.FIELDS
        return [flat[i * n:(i + 1) * n] for i in range(self.world_size)]

    def _launch(self, row: list[int], start_data, finish, asynchronous: bool) -> PendingCollective:
        """Check the call's fingerprints (when on), then start the data operation, in call order.

        The check must complete before the data moves: Gloo aborts the whole process when a peer
        sends more bytes than this side expects, so mismatched shapes must never reach it.
        Asynchronous calls do both on the queue's thread and return at once.
        """
        def start():
            if self.check_fingerprints:
                self._check_rows(self._exchange(row))
            return self._start(row, start_data)

        if asynchronous:
            future = self._queue.submit(start)
            return PendingCollective(lambda: self._wait(row, future.result()), finish)
        work = self._queue.run(start)
        return PendingCollective(lambda: self._wait(row, work), finish)

    def _check_rows(self, rows: list[list[int]]) -> None:
        if self.check_fingerprints and fingerprint.mismatch(rows):
            names = [self.world.describe(r) for r in range(self.world_size)]
            self._broken = InvalidArgumentError(fingerprint.mismatch_message(rows, names))
            self._abort()
            raise self._broken

    def _start(self, row: list[int], start):
        """Start a backend operation; a failure to start is diagnosed like a failure to finish."""
        if self._broken is not None:  # a queued call behind a failed one
            raise type(self._broken)(f"The collective group is unusable after an earlier failure: {self._broken}")
        try:
            return start()
        except Exception as err:
            self._fail(row, err)

    def _wait(self, row: list[int], work) -> None:
        """Wait for a backend operation; failures become errors naming the missing peers."""
        try:
            work.wait()
        except Exception as err:
            self._fail(row, err)

    def _fail(self, row: list[int], err: Exception):
        if self._broken is not None:  # an operation that died with the group after the first failure
            raise type(self._broken)(f"The collective group is unusable after an earlier failure: {self._broken}") from err
        call = fingerprint.describe(row)
        self._broken = diagnose(self._report, self.world, call, err, self.timeout_seconds, self._abort)
        raise self._broken from err

    def _abort(self) -> None:
        """Close this process's connections so that peers blocked on it notice at once."""
        for backend in {id(b): b for b in (self._backend, self._control) if b is not None}.values():
            try:
                backend.abort()
            except Exception:
                pass


class _WorkGroup:
    """Several backend operations waited as one."""

    def __init__(self, works: list):
        self._works = works

    def wait(self) -> None:
        for work in self._works:
            work.wait()




def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.shape[0] == rows:
        return tensor
    pad = tensor.new_zeros((rows - tensor.shape[0], *tensor.shape[1:]))
    return torch.cat([tensor, pad])


__all__ = ["ProcessCollective"]
