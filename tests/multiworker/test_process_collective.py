"""ProcessCollective across 2-3 real processes on loopback: results, dead/hung peers, mismatches."""

from __future__ import annotations

import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PRELUDE = """
import json, os, sys, time, torch
from multidev import errors
from multidev.distribute.cluster_resolver import TFConfigClusterResolver, collective_world
from multidev.collectives.process import ProcessCollective
world = collective_world(TFConfigClusterResolver())
pc = ProcessCollective(world, timeout_seconds=float(os.environ.get("T", "4")))
rank = world.rank
def report(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
def expect_error(fn):
    t0 = time.monotonic()
    try:
        fn()
    except errors.OpError as err:
        report(type=type(err).__name__, msg=str(err), seconds=time.monotonic() - t0)
        sys.exit(0)
    report(type=None, msg="no error", seconds=time.monotonic() - t0)
"""


def test_all_reduce_all_gather_broadcast_barrier_across_chief_and_worker():
    body = PRELUDE + """
s = torch.arange(4, dtype=torch.float32) * (rank + 1)
pc.all_reduce(s)
m = torch.full((3,), float(rank)); pc.all_reduce(m, "MEAN")
i = torch.tensor([rank + 1, 7]); pc.all_reduce(i)
nc = torch.arange(6.).reshape(2, 3).t() * (rank + 1); pc.all_reduce(nc)   # non-contiguous, in place
g = pc.all_gather(torch.full((rank + 1, 2), float(rank)))
scalar = pc.all_gather(torch.tensor(float(rank) + 0.5))
b = torch.full((3,), float(rank)); pc.broadcast(b, src=1)
buckets = [torch.full((n,), float(rank + 1)) for n in (5, 2, 3)]
pending = [pc.all_reduce_async(x, "MEAN") for x in buckets]   # several in flight, waited out of order
mid = torch.ones(2); pc.all_reduce(mid)                         # a synchronous call queued behind them
batch = pc.batch_all_reduce([torch.full((2,), rank + 1.0), torch.full((1, 2), rank + 3.0, dtype=torch.float64)])
waited = [pending[i].wait().tolist() for i in (2, 0, 1)]
pc.barrier()
pc.shutdown()
try:
    pc.barrier()
    closed = "no error"
except errors.FailedPreconditionError:
    closed = "FailedPreconditionError"
report(rank=rank, sum=s.tolist(), mean=m.tolist(), ints=i.tolist(), nc=nc.tolist(),
       gather=[x.tolist() for x in g], scalar=[x.tolist() for x in scalar], bcast=b.tolist(), closed=closed, waited=waited, mid=mid.tolist(), batch=[x.tolist() for x in batch],
       me=world.describe(rank))
"""
    procs = run_cluster(body, workers=1, chief=True, timeout=60)
    results = [results_json(p) for p in procs]
    assert [r["rank"] for r in results] == [0, 1]
    assert results[0]["me"].startswith("chief 0 (127.0.0.1:")
    assert results[1]["me"].startswith("worker 0 (127.0.0.1:")
    for r in results:
        assert r["sum"] == [0.0, 3.0, 6.0, 9.0]
        assert r["mean"] == [0.5, 0.5, 0.5]
        assert r["ints"] == [3, 14]
        assert r["nc"] == [[0.0, 9.0], [3.0, 12.0], [6.0, 15.0]]
        assert r["gather"] == [[[0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]
        assert r["scalar"] == [0.5, 1.5]
        assert r["bcast"] == [1.0, 1.0, 1.0]
        assert r["closed"] == "FailedPreconditionError"
        assert r["waited"] == [[1.5] * 3, [1.5] * 5, [1.5] * 2] and r["mid"] == [2.0, 2.0]
        assert r["batch"] == [[3.0, 3.0], [[7.0, 7.0]]]


def test_killed_peer_is_named_within_the_timeout():
    body = PRELUDE + """
x = torch.ones(8)
pc.all_reduce(x)
if rank == 1:
    os._exit(7)          # dies between collectives, without a word
expect_error(lambda: [pc.all_reduce(torch.ones(8)) for _ in range(3)])
"""
    procs = run_cluster(body, workers=2, timeout=60, env={"T": "20"})
    assert procs[1].returncode == 7
    r = results_json(procs[0])
    assert r["type"] == "UnavailableError", r
    assert "worker 1 (127.0.0.1:" in r["msg"] and "all_reduce #2" in r["msg"], r
    assert r["seconds"] < 20, r   # a dead peer is noticed well before the 20 s timeout


def test_killed_chief_is_named_by_every_worker():
    body = PRELUDE + """
pc.barrier()
if rank == 0:
    os._exit(9)          # the chief hosts the rendezvous store: it goes down too
expect_error(lambda: [pc.all_reduce(torch.ones(100)) for _ in range(3)])
"""
    procs = run_cluster(body, workers=2, chief=True, timeout=60, env={"T": "20"})
    assert procs[0].returncode == 9
    for p in procs[1:]:
        r = results_json(p)
        assert r["type"] == "UnavailableError", r
        assert r["msg"].startswith("chief 0 (127.0.0.1:") and "all_reduce #2" in r["msg"], r
        assert r["seconds"] < 20, r


def test_hung_peer_is_named_after_the_timeout_on_every_survivor():
    body = PRELUDE + """
pc.barrier()
if rank == 2:
    time.sleep(40)       # hung: alive but never reaches the collective; killed by the harness
    sys.exit(0)
expect_error(lambda: pc.all_reduce(torch.ones(8)))
"""
    procs = run_cluster(body, workers=3, timeout=40, env={"T": "3"}, wait_ranks=[0, 1])
    for p in procs[:2]:
        r = results_json(p)
        assert r["type"] == "DeadlineExceededError", r
        assert "worker 2 (127.0.0.1:" in r["msg"] and "did not reach all_reduce #2" in r["msg"], r
        assert "worker 0 (" not in r["msg"].split("did not reach")[0] and "worker 1 (" not in r["msg"].split("did not reach")[0]
        assert r["seconds"] < 15, r


@pytest.mark.parametrize(
    "call0, call1, expect0, expect1",
    [
        ("pc.all_reduce(torch.ones(4))", "pc.all_gather(torch.ones(4))",
         "all_reduce #2 (shape=(4,), dtype=float32, op=SUM)", "all_gather #2 (shape=(4,), dtype=float32)"),
        ("pc.all_reduce(torch.ones(4))", "pc.all_reduce(torch.ones(5))", "shape=(4,)", "shape=(5,)"),
        ("pc.all_reduce(torch.ones(2, 3))", "pc.all_reduce(torch.ones(3, 2))", "shape=(2, 3)", "shape=(3, 2)"),
        ("pc.broadcast(torch.ones(3), src=0)", "pc.broadcast(torch.ones(3, dtype=torch.float64), src=0)",
         "dtype=float32", "dtype=float64"),
        ("pc.all_reduce_async(torch.ones(4)).wait()", "pc.all_reduce_async(torch.ones(4), 'MEAN').wait()",
         "op=SUM", "op=MEAN"),
    ],
    ids=["order", "shape", "same-size-shape", "dtype", "async-reduce-op"],
)
def test_mismatched_calls_fail_fast_naming_each_workers_call(call0, call1, expect0, expect1):
    body = PRELUDE + f"""
pc.barrier()
expect_error(lambda: ({call0}) if rank == 0 else ({call1}))
"""
    procs = run_cluster(body, workers=2, timeout=40, env={"T": "20"})
    for p in procs:
        r = results_json(p)
        assert r["type"] == "InvalidArgumentError", r
        msg = r["msg"]
        assert "Collective mismatch" in msg
        w0, w1 = msg.index("worker 0 ("), msg.index("worker 1 (")
        assert expect0 in msg[w0:w1] and expect1 in msg[w1:], msg
        assert r["seconds"] < 20, r   # detected from the fingerprints, not by waiting for the timeout


def test_paused_store_host_is_named_by_every_survivor_within_the_timeout():
    # Worker 0 hosts the rendezvous store: paused (SIGSTOP), its sockets stay open but nothing answers,
    # so the failure report must not wait on the store without a deadline (issue 18 item 1).
    body = PRELUDE + """
import signal
pc.barrier()
if rank == 0:
    os.kill(os.getpid(), signal.SIGSTOP)   # paused; the harness kills it
expect_error(lambda: pc.all_reduce(torch.ones(8)))
"""
    procs = run_cluster(body, workers=3, timeout=60, env={"T": "3"}, wait_ranks=[1, 2])
    for p in procs[1:]:
        r = results_json(p)
        assert r["type"] == "DeadlineExceededError", r   # hung, not dead: the documented type
        assert r["msg"].startswith("worker 0 (127.0.0.1:") and "hung" in r["msg"], r
        assert r["seconds"] < 3 + 20, r   # the timeout plus a bounded margin, never forever


def test_fingerprints_off_warns_that_a_same_size_other_shape_call_is_combined_silently():
    # The documented price of MULTIDEV_COLLECTIVE_FINGERPRINTS=0 (issue 18 item 7): no error, a wrong result.
    body = PRELUDE + """
x = torch.arange(6.).reshape((2, 3) if rank == 0 else (3, 2))
pc.all_reduce(x)
report(rank=rank, value=x.flatten().tolist(), checked=pc.check_fingerprints)
"""
    procs = run_cluster(body, workers=2, timeout=60, env={"MULTIDEV_COLLECTIVE_FINGERPRINTS": "0"})
    for p in procs:
        r = results_json(p)
        assert r["checked"] is False and r["value"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0], r
        assert "Collective fingerprints are off" in p.stderr and "(2, 3)" in p.stderr, p.stderr
