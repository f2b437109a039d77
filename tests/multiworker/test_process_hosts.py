"""Ranks post their host so errors name lost hosts; the failure report never blocks on a cut-off store."""

from __future__ import annotations

import threading
import time

import torch.distributed as dist

from multidev.collectives.process_failure import FailureReport
from multidev.collectives.process_hosts import own_host, post_host, with_hosts
from multidev.collectives.process_world import ProcessMember, ProcessWorld


def torchrun_like_world(rank: int) -> ProcessWorld:
    """Three ranks whose addresses are unknown (as torchrun gives them), rendezvous on loopback."""
    members = tuple(ProcessMember("worker", r) for r in range(3))
    return ProcessWorld(rank=rank, members=members, store_host="127.0.0.1", store_port=29400)


def test_members_without_an_address_take_the_host_they_posted():
    store = dist.HashStore()
    for rank in range(3):
        post_host(store, torchrun_like_world(rank), "job/0")
    world = with_hosts(store, torchrun_like_world(1), "job/0")
    assert [world.describe(r) for r in range(3)] == ["worker 0 (127.0.0.1)", "worker 1 (127.0.0.1)",
                                                     "worker 2 (127.0.0.1)"]
    assert world.rank == 1 and world.store_port == 29400
    known = ProcessWorld(rank=0, members=(ProcessMember("worker", 0, "10.0.0.1:2222"), ProcessMember("worker", 1)),
                         store_host="10.0.0.1", store_port=2222, bind_host="10.0.0.1")
    assert own_host(known) == "10.0.0.1"                      # a TF_CONFIG host is kept as it is
    unposted = with_hosts(dist.HashStore(), known, "p")       # nothing posted: nothing waited for
    assert (unposted.describe(0), unposted.describe(1)) == ("worker 0 (10.0.0.1:2222)", "worker 1")


class StuckStore:
    """A store client whose calls never return (what a client of a cut-off store host does)."""

    def __init__(self):
        self.release = threading.Event()

    def set_timeout(self, timeout):
        pass

    def set(self, key, value):
        self.release.wait()

    def check(self, keys):
        self.release.wait()
        return False


def test_the_failure_report_gives_up_on_a_store_that_never_answers():
    store = StuckStore()
    report = FailureReport(store, torchrun_like_world(2), "job/0", timeout_s=0.5)
    start = time.monotonic()
    try:
        assert report.post("all_reduce #3") is False          # unreachable: the rendezvous host is named
        assert report.absent_peers() is None
    finally:
        store.release.set()
    assert time.monotonic() - start < 60                      # returned (bounded), not hung
