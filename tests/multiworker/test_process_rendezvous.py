"""Rendezvous in this process (no children): loopback binding, absent peers named, one-process worlds."""

from __future__ import annotations

import socket

import pytest
import torch

from multidev import errors
from multidev.collectives.process import ProcessCollective
from multidev.collectives.process_rendezvous import _listen_fd
from multidev.collectives.process_world import ProcessMember, ProcessWorld, is_loopback_host, loopback_address
from tests.multiworker._cluster import free_ports

pytestmark = pytest.mark.timeout(60)


def loopback_world(rank: int, size: int = 2) -> ProcessWorld:
    ports = free_ports(size)
    members = tuple(ProcessMember("worker", i, f"127.0.0.1:{p}") for i, p in enumerate(ports))
    return ProcessWorld(rank=rank, members=members, store_host="127.0.0.1", store_port=ports[0], bind_host="127.0.0.1")


def test_local_rendezvous_listens_on_loopback_only():
    world = loopback_world(0)
    sock = socket.socket(fileno=_listen_fd(world))
    try:
        assert sock.getsockname() == ("127.0.0.1", world.store_port)
    finally:
        sock.close()


def test_a_worker_that_never_starts_is_named_by_the_chief():
    world = loopback_world(0)
    with pytest.raises(errors.DeadlineExceededError, match=r"worker 1 \(127\.0\.0\.1:\d+\) did not join the job within 1 s"):
        ProcessCollective(world, timeout_seconds=1)


def test_an_absent_rendezvous_host_is_named_by_the_others():
    world = loopback_world(1)
    with pytest.raises(errors.DeadlineExceededError, match=r"could not reach the rendezvous of worker 0 \(127\.0\.0\.1:\d+\)"):
        ProcessCollective(world, timeout_seconds=1)


def test_one_process_world_needs_no_network():
    world = ProcessWorld(rank=0, members=(ProcessMember("worker", 0),), store_host="127.0.0.1", store_port=0)
    with ProcessCollective(world, timeout_seconds=1) as pc:
        t = torch.arange(3.0)
        assert pc.all_reduce(t, "MEAN") is t and t.tolist() == [0.0, 1.0, 2.0]
        assert [x.tolist() for x in pc.all_gather(torch.ones(2))] == [[1.0, 1.0]]
        assert pc.broadcast(t, src=0).tolist() == [0.0, 1.0, 2.0]
        pc.barrier()
        with pytest.raises(ValueError, match=r"broadcast src 1 is not a rank: expected 0..0"):
            pc.broadcast(t, src=1)
        with pytest.raises(ValueError, match="Unsupported reduce op 'MAX'"):
            pc.all_reduce(t, "MAX")


def test_bad_constructor_arguments():
    world = ProcessWorld(rank=0, members=(ProcessMember("worker", 0),), store_host="127.0.0.1", store_port=0)
    with pytest.raises(ValueError, match="Unknown backend 'mpi'"):
        ProcessCollective(world, backend="mpi")
    with pytest.raises(ValueError, match="timeout_seconds must be a positive"):
        ProcessCollective(world, timeout_seconds=-1)
    with pytest.raises(ValueError, match="rank 2 is outside the world of 1"):
        ProcessWorld(rank=2, members=(ProcessMember("worker", 0),), store_host="h", store_port=1)


def _fake_resolver(table: dict):
    """A ``socket.getaddrinfo`` that resolves the names of ``table`` as a Debian /etc/hosts would."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in table:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in table[host]]
        return real(host, port, *args, **kwargs)

    return getaddrinfo


@pytest.mark.parametrize("host, bound", [
    ("127.1", "127.0.0.1"),              # inet_aton short form
    ("localhost.", "127.0.0.1"),         # fully qualified
    ("LOCALHOST", "127.0.0.1"),
    ("ip6-localhost", "::1"),            # Debian's /etc/hosts name for ::1
    ("myhost", "127.0.1.1"),             # the machine's hostname, mapped to 127.0.1.1 by Debian
    ("[::1]", "::1"),
    ("127.0.0.2", "127.0.0.2"),
])
def test_loopback_is_decided_by_resolving_the_address(monkeypatch, host, bound):
    monkeypatch.setattr(socket, "getaddrinfo", _fake_resolver({"ip6-localhost": ["::1"], "myhost": ["127.0.1.1"]}))
    assert loopback_address(host) == bound
    world = ProcessWorld(rank=0, members=(ProcessMember("worker", 0, f"{host}:1"), ProcessMember("worker", 1, f"{host}:2")),
                         store_host=host, store_port=1)
    assert world.is_loopback and world.loopback_bind_address == bound


@pytest.mark.parametrize("host", ["10.0.0.1", "2001:db8::1", "mixed", "no-such-host.invalid", "0.0.0.0", ""])
def test_other_addresses_are_not_loopback(monkeypatch, host):
    monkeypatch.setattr(socket, "getaddrinfo", _fake_resolver({"mixed": ["127.0.0.1", "192.168.1.5"]}))
    assert loopback_address(host) is None and not is_loopback_host(host)


def test_a_job_with_a_remote_member_listens_everywhere(monkeypatch):
    # the chief's hostname maps to 127.0.1.1 locally (Debian), but worker 1 is another machine
    monkeypatch.setattr(socket, "getaddrinfo", _fake_resolver({"hosta": ["127.0.1.1"], "hostb": ["10.0.0.2"]}))
    members = (ProcessMember("worker", 0, "hosta:2222"), ProcessMember("worker", 1, "hostb:2222"))
    world = ProcessWorld(rank=0, members=members, store_host="hosta", store_port=2222)
    assert not world.is_loopback and world.loopback_bind_address is None and _listen_fd(world) is None


def test_the_machine_hostname_spelling_of_a_local_job_listens_on_loopback_only():
    host = socket.gethostname()
    if loopback_address(host) is None:
        pytest.skip(f"this machine's hostname {host!r} does not resolve to loopback")
    port = free_ports(1)[0]
    world = ProcessWorld(rank=0, members=(ProcessMember("worker", 0, f"{host}:{port}"), ProcessMember("worker", 1, f"{host}:{port + 1}")),
                         store_host=host, store_port=port)
    sock = socket.socket(fileno=_listen_fd(world))
    try:
        assert sock.getsockname() == (loopback_address(host), port)
    finally:
        sock.close()


def test_short_form_loopback_rendezvous_listens_on_loopback_only():
    port = free_ports(1)[0]
    world = ProcessWorld(rank=0, members=(ProcessMember("worker", 0, f"127.1:{port}"), ProcessMember("worker", 1, "127.1:1")),
                         store_host="127.1", store_port=port)
    sock = socket.socket(fileno=_listen_fd(world))
    try:
        assert sock.getsockname() == ("127.0.0.1", port)
    finally:
        sock.close()
