"""The two-host fixture itself: its own namespaces and addresses only, traffic flows, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import time
import sys

import pytest

from tests.multiworker import netns


def test_netns_hosts_reach_each_other_on_their_own_addresses_only(two_hosts):
    a, b = two_hosts
    assert a.address != b.address and a.address.rsplit(".", 1)[0] == b.address.rsplit(".", 1)[0]
    assert str(os.getpid()) in a.netns and str(os.getpid()) in b.netns
    for host in (a, b):
        shown = host.run(["ip", "-o", "-4", "addr", "show"]).stdout
        # Inside a namespace: loopback and the one address the fixture gave it, nothing else.
        assert sorted(line.split()[3] for line in shown.splitlines()) == sorted(["127.0.0.1/8", f"{host.address}/24"])
    server = b.popen([sys.executable, "-c", "import socket; s = socket.create_server(('%s', 29400)); "
                      "c, _ = s.accept(); c.sendall(c.recv(16)[::-1])" % b.address],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client = a.run([sys.executable, "-c", "import socket, time\n"
                    "for _ in range(100):\n"
                    "    try:\n"
                    "        c = socket.create_connection(('%s', 29400), timeout=5); break\n"
                    "    except OSError: time.sleep(0.1)\n"
                    "c.sendall(b'abc'); print(c.recv(16).decode())" % b.address], timeout=60)
    assert client.stdout.strip() == "cba", client.stderr
    server.wait(10)
    a.link("down")
    cut = a.run([sys.executable, "-c", "import socket; socket.create_connection(('%s', 29400), timeout=2)" % b.address])
    assert cut.returncode != 0                            # a cut link carries nothing


def test_netns_teardown_kills_what_runs_inside_and_deletes_the_namespaces():
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    pid = os.getpid() + 7_000_000                         # a pid no process has: our own unique names
    try:
        a, b = netns._create(pid)
        sleeper = a.popen(["sleep", "60"])
        deadline = time.monotonic() + 20   # `ip netns exec` enters the namespace just after it starts
        while a.pids() != [sleeper.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.pids() == [sleeper.pid]
    finally:
        netns._destroy(pid)
    assert sleeper.wait(10) == -9
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert a.netns not in listed and b.netns not in listed
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert a.ifname not in links and b.ifname not in links
