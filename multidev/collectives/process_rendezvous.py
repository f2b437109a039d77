"""Meeting of the processes: the rendezvous store, a bounded join, and the backend (Gloo or NCCL).

Rank 0 hosts torch's TCP store at its address; when every address of the job resolves to loopback
(``127.1``, ``localhost.``, a hostname mapped to 127.0.1.1 ...) it listens on loopback only.
Every rank then posts a join key and waits, bounded, for all the others, so a process that never
starts is named (``worker 2 (127.0.0.1:41003) did not join ...``) instead of waited for forever.
"""

from __future__ import annotations

import datetime
import os
import socket
import time
from typing import Callable

import torch.distributed as dist

from multidev._core.errors import DeadlineExceededError, UnauthenticatedError, UnavailableError
from multidev.collectives.process_auth import JobGate, job_secret
from multidev.collectives.process_failure import first_line
from multidev.collectives.process_world import ProcessWorld, loopback_address

_POLL_SECONDS = 0.02


def _listen_fd(world: ProcessWorld) -> int | None:
    """A socket bound to the loopback rendezvous address (None: let the store listen everywhere)."""
    host = world.loopback_bind_address
    if host is None:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, world.store_port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise UnavailableError(
            f"{world.describe(0)} cannot listen on {host}:{world.store_port} for the rendezvous: {err}. "
            "Is another job using this port? Pick a free port in TF_CONFIG (multidev launch does)."
        ) from err
    return sock.detach()  # the store owns the descriptor from now on


def open_store(world: ProcessWorld, timeout_s: float) -> dist.Store:
    """The rendezvous store: hosted by rank 0 (unless torchrun's agent hosts it), joined by the others."""
    if world.world_size == 1:
        return dist.HashStore()
    timeout = datetime.timedelta(seconds=timeout_s)
    host, port = world.loopback_bind_address or world.store_host.strip("[]"), world.store_port
    if world.rank == 0 and not world.store_is_external:
        fd = _listen_fd(world)
        try:
            return dist.TCPStore(host, port, None, True, timeout, wait_for_workers=False, master_listen_fd=fd)
        except Exception as err:
            raise UnavailableError(f"{world.describe(0)} could not start the rendezvous on {host}:{port}: {err}") from err
    try:
        return dist.TCPStore(host, port, None, False, timeout)
    except Exception as err:
        raise DeadlineExceededError(
            f"{world.describe(world.rank)} could not reach the rendezvous of {world.describe(0)} at "
            f"{host}:{port} within {timeout_s:g} s: {first_line(err)}. Is that process running and "
            "reachable? Start every task of the cluster, or raise the timeout (MULTIDEV_COLLECTIVE_TIMEOUT)."
        ) from err


def join(store: dist.Store, world: ProcessWorld, prefix: str, timeout_s: float,
         before_join: Callable[[dist.Store], None] | None = None) -> dist.Store:
    """Admit this rank (job secret, see ``process_auth``), post its join record and wait, bounded, for
    every rank's; name the absent ones on timeout. Returns the store the job uses from now on (signed
    when the job has a secret).

    Raises:
        UnauthenticatedError: this process does not hold the job's secret (or the host not ours).
        DeadlineExceededError: a rank did not join within ``timeout_s``.
    """
    if world.world_size == 1:
        return store
    where = f"{world.store_host}:{world.store_port}"
    gate = JobGate(store, prefix, job_secret(), world.describe(world.rank), where, warn_open="loopback" if world.is_loopback else "network")
    keys = [f"{prefix}/join/{r}" for r in range(world.world_size)]
    deadline = time.monotonic() + timeout_s
    try:
        if world.rank == 0:
            gate.post()
        _wait_until(deadline, gate.posted, lambda: _absent(world, [0], timeout_s, where))
        session = gate.admit()
        if before_join is not None:     # e.g. post this rank's host, so every joined rank's is readable
            before_join(session)
        session.set(keys[world.rank], world.describe(world.rank))
        members = _Members(session, keys)
        _wait_until(deadline, members.all_joined, lambda: _absent(world, members.missing(), timeout_s, where,
                                                                  members.forged))
        gate.confirm()
        return session
    except (DeadlineExceededError, UnavailableError, UnauthenticatedError):
        raise
    except Exception as err:
        raise UnavailableError(
            f"The rendezvous hosted by {world.describe(0)} became unreachable while "
            f"{world.describe(world.rank)} was joining: {first_line(err)}."
        ) from err


class _Members:
    """The join records seen so far; a record that fails verification counts as absent (and is named)."""

    def __init__(self, store: dist.Store, keys: list[str]):
        self._store = store
        self._keys = keys
        self._joined: set[int] = set()
        self.forged: set[int] = set()

    def all_joined(self) -> bool:
        pending = [r for r in range(len(self._keys)) if r not in self._joined]
        if not self._store.check([self._keys[r] for r in pending]):  # one round trip per poll
            return False
        for rank in pending:
            try:
                self._store.get(self._keys[rank])
            except UnauthenticatedError:
                self.forged.add(rank)  # an impostor's record; the real rank may still overwrite it
                continue
            self._joined.add(rank)
        return len(self._joined) == len(self._keys)

    def missing(self) -> list[int]:
        """Ranks without a genuine join record (checked one by one: only on timeout)."""
        out = []
        for rank, key in enumerate(self._keys):
            if rank in self._joined:
                continue
            if self._store.check([key]):
                try:
                    self._store.get(key)
                    continue
                except UnauthenticatedError:
                    self.forged.add(rank)
            out.append(rank)
        return out


def _wait_until(deadline: float, done, error) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise error()
        time.sleep(_POLL_SECONDS)


def _absent(world: ProcessWorld, missing: list[int], timeout_s: float, where: str,
            forged: set[int] = frozenset()) -> DeadlineExceededError:
    impostors = sorted(forged & set(missing))
    note = (f" A record for {world.describe_ranks(impostors)} not signed with this job's secret was seen: "
            "another process tried to join in its place and was ignored." if impostors else "")
    return DeadlineExceededError(
        f"{world.describe_ranks(missing)} did not join the job within {timeout_s:g} s "
        f"(rendezvous at {where}, seen from {world.describe(world.rank)}).{note} "
        "Start every task of the cluster, check its log, or raise the timeout."
    )


def _gloo_device(world: ProcessWorld):
    gloo = dist.ProcessGroupGloo
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return gloo.create_device(interface=os.environ["GLOO_SOCKET_IFNAME"].split(",")[0])
    if world.bind_host:
        local = loopback_address(world.bind_host) if world.is_loopback else None
        return gloo.create_device(hostname=local or world.bind_host.strip("[]"))
    return gloo.create_default_device()


def create_backend(store: dist.Store, world: ProcessWorld, backend: str, prefix: str, timeout_s: float):
    """The torch.distributed backend object (``ProcessGroupGloo`` or ``ProcessGroupNCCL``) of ``world``."""
    timeout = datetime.timedelta(seconds=timeout_s)
    scoped = dist.PrefixStore(f"{prefix}/{backend}", store)
    try:
        if backend == "gloo":
            options = dist.ProcessGroupGloo._Options()
            options._timeout = timeout
            options._devices = [_gloo_device(world)]
            return dist.ProcessGroupGloo(scoped, world.rank, world.world_size, options)
        if backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            return dist.ProcessGroupNCCL(scoped, world.rank, world.world_size, options)
    except Exception as err:
        raise UnavailableError(
            f"{world.describe(world.rank)} could not connect to its peers ({backend}) within {timeout_s:g} s: "
            f"{first_line(err)}. A peer may have exited after the rendezvous; check the other workers' logs."
        ) from err
    raise ValueError(f"Unknown backend {backend!r}: expected 'gloo' or 'nccl'.")


__all__ = ["open_store", "join", "create_backend"]
