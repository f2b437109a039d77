"""Two simulated hosts: Linux network namespaces joined by a veth pair (root only; skipped elsewhere).

``two_hosts`` creates namespaces ``md<pid>a`` and ``md<pid>b`` (pid: this test process, so parallel
runs never collide), a veth pair with one end in each, and private addresses it picks itself
(``10.213.<pid % 250>.1/24`` and ``.2``). Only these two addresses are ever used. Everything is torn
down at the end, whether the test passed, failed or the fixture itself failed half-way: processes
still running in the namespaces are killed (by pid), then the namespaces are deleted, which also
deletes the veth pair.

Example:
    def test_ping(two_hosts):
        a, b = two_hosts
        assert a.run(["ping", "-c", "1", b.address]).returncode == 0
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time

import pytest

_IP_TIMEOUT = 20


@dataclasses.dataclass
class Host:
    """One namespace: its name, its veth end and its address."""

    netns: str
    ifname: str
    address: str

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside this host's namespace."""
        return ["ip", "netns", "exec", self.netns]

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside the namespace (in its own process group)."""
        return subprocess.Popen(self.prefix() + list(argv), start_new_session=True, **kwargs)

    def run(self, argv: list[str], timeout: float = _IP_TIMEOUT) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the namespace and wait for it."""
        return subprocess.run(self.prefix() + list(argv), capture_output=True, text=True, timeout=timeout)

    def link(self, state: str) -> None:
        """``ip link set <veth> up|down`` inside the namespace (cuts or restores this host's link)."""
        _ip("-n", self.netns, "link", "set", self.ifname, state)

    def pids(self) -> list[int]:
        """Processes running inside the namespace (all started by the test)."""
        proc = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True,
                              timeout=_IP_TIMEOUT)
        return [int(p) for p in proc.stdout.split()]

    def kill_all(self) -> list[int]:
        """SIGKILL every process inside the namespace (the host "dies"); returns their pids."""
        pids = self.pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids


def _ip(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT)
    if proc.returncode != 0:
        raise OSError(f"`ip {' '.join(args)}` failed (rc={proc.returncode}): {proc.stderr.strip()}")
    return proc


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    return None


def _create(pid: int) -> list[Host]:
    subnet = f"10.213.{pid % 250}"
    hosts = [Host(f"md{pid}{s}", f"md{pid}{s}", f"{subnet}.{i + 1}") for i, s in enumerate("ab")]
    for host in hosts:
        _ip("netns", "add", host.netns)
    a, b = hosts
    _ip("link", "add", a.ifname, "netns", a.netns, "type", "veth", "peer", "name", b.ifname, "netns", b.netns)
    for host in hosts:
        _ip("-n", host.netns, "link", "set", "lo", "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.ifname)
        _ip("-n", host.netns, "link", "set", host.ifname, "up")
    return hosts


def _destroy(pid: int) -> None:
    """Kill what runs in our namespaces, then delete them (and with them the veth pair)."""
    for s in "ab":
        name = f"md{pid}{s}"
        if not os.path.exists(f"/run/netns/{name}"):
            continue
        host = Host(name, name, "")
        for _ in range(3):
            if not host.kill_all():
                break
            time.sleep(0.2)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=_IP_TIMEOUT)


@pytest.fixture
def two_hosts(request):
    """Two namespaces ``(a, b)`` joined by a veth pair; skipped where namespaces cannot be made."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    pid = os.getpid()
    _destroy(pid)                       # leftovers of an earlier test in this same process
    request.addfinalizer(lambda: _destroy(pid))
    try:
        hosts = _create(pid)
    except (OSError, subprocess.TimeoutExpired) as err:
        _destroy(pid)
        pytest.skip(f"cannot create network namespaces here: {err}")
    a, b = hosts
    ping = a.run(["ping", "-c", "1", "-W", "5", b.address]) if shutil.which("ping") else None
    if ping is not None and ping.returncode != 0:
        pytest.fail(f"the veth pair does not carry traffic: {ping.stdout}{ping.stderr}")
    try:
        yield a, b
    finally:
        _destroy(pid)
