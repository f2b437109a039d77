"""Replica runtime faults found by an attack (issue 18): mismatched PerReplica counts, hung replicas,
Ctrl-C during run, strategies never freed."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref

import pytest
import torch

import multidev as md
from multidev.values.distributed import PerReplica
from tests.conftest import ROOT

CPUS2 = ["/cpu:0", "/cpu:1"]


@pytest.mark.parametrize("count", [1, 3])
def test_per_replica_with_the_wrong_number_of_values_is_rejected_by_run_and_reduce(count):
    strategy = md.distribute.MirroredStrategy(CPUS2)
    value = PerReplica([torch.tensor(float(i)) for i in range(count)])
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values .* 2 local replica\(s\); it needs exactly 2"):
        strategy.run(lambda x: x, args=(value,))
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.run(lambda x: x, kwargs={"x": {"nested": [value]}})
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.reduce("SUM", value, axis=None)
    with pytest.raises(ValueError, match=rf"PerReplica with {count} values"):
        strategy.gather(PerReplica([torch.ones(1)] * count), axis=0)
    good = PerReplica([torch.tensor(1.0), torch.tensor(2.0)])
    assert float(strategy.reduce("SUM", strategy.run(lambda x: x * 2, args=(good,)), axis=None)) == 6.0


def test_run_raises_without_waiting_for_a_hung_replica_and_refuses_until_it_returns(monkeypatch):
    monkeypatch.setenv("MULTIDEV_COLLECTIVE_TIMEOUT", "1")
    strategy = md.distribute.MirroredStrategy(CPUS2)
    release = threading.Event()

    def step():
        ctx = md.distribute.get_replica_context()
        if ctx.replica_id_in_sync_group == 0:
            release.wait(120)      # hung in its own code, never reaches the collective
        return ctx.all_reduce("SUM", torch.ones(2))

    try:
        with pytest.raises(md.errors.DeadlineExceededError, match=r"Replica\(s\) \[0\] did not reach"):
            strategy.run(step)     # raised while replica 0 still hangs: it did not wait for it
        assert not release.is_set()
        with pytest.raises(RuntimeError, match=r"Replica\(s\) \[0\] of an earlier strategy.run .* still running"):
            strategy.run(lambda: 1)   # it would join this run's collectives
    finally:
        release.set()
    ok = strategy.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(2)))
    assert [t.tolist() for t in strategy.experimental_local_results(ok)] == [[2.0, 2.0]] * 2


def test_collective_timeout_is_one_documented_value(fresh):
    out = fresh("""
        import os, multidev as md
        from multidev.collectives.process_config import DEFAULT_TIMEOUT_SECONDS
        s = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        print(DEFAULT_TIMEOUT_SECONDS, s.extended._rendezvous.timeout)
        os.environ["MULTIDEV_COLLECTIVE_TIMEOUT"] = "7"
        print(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).extended._rendezvous.timeout)
        options = md.distribute.experimental.CommunicationOptions(timeout_seconds=5)
        print(md.distribute.MultiWorkerMirroredStrategy(communication_options=options).extended._rendezvous.timeout)
    """, env={"MULTIDEV_LOGICAL_CPUS": "2", "TF_CONFIG": ""}).stdout.split()
    assert out == ["30.0", "30.0", "7.0", "5.0"]
    with open(os.path.join(ROOT, "docs", "multi_worker.md")) as f:
        assert "else 30 s" in f.read()


def test_strategies_that_ran_are_freed_with_their_threads():
    def make_and_run():
        s = md.distribute.MirroredStrategy(CPUS2)
        with s.scope():
            v = md.Variable(1.0)
        s.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", v.value()))
        return weakref.ref(s)

    gc.collect()
    before = threading.active_count()
    refs = [make_and_run() for _ in range(20)]
    gc.collect()
    deadline = time.monotonic() + 30
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert threading.active_count() <= before, [t.name for t in threading.enumerate()]


CTRL_C_CHILD = """
import faulthandler, signal, sys, time, torch, multidev as md
faulthandler.register(signal.SIGUSR1, all_threads=True)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    w = md.Variable(torch.ones(64))
def step():
    ctx = md.distribute.get_replica_context()
    g = torch.randn(64, 64) @ torch.randn(64, 64)
    return ctx.all_reduce("SUM", g.sum(0) * w)
strategy.run(step)
print("READY", flush=True)
while True:
    try:
        while True:
            strategy.run(step)
    except KeyboardInterrupt:
        pass
    out = strategy.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1)))
    print("OK", [t.tolist() for t in strategy.experimental_local_results(out)], flush=True)
"""


FIT_CTRL_C_CHILD = """
import faulthandler, signal, numpy as np, torch, multidev as md
faulthandler.register(signal.SIGUSR1, all_threads=True)
from multidev import keras
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.RandomState(0)
x = rng.randn(256, 8).astype("float32"); y = x.sum(1, keepdims=True)
with strategy.scope():
    model = keras.models.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
model.fit(x[:16], y[:16], batch_size=8, verbose=0)
print("READY", flush=True)
while True:
    try:
        model.fit(x, y, batch_size=8, epochs=10**6, verbose=0)
    except KeyboardInterrupt:
        pass
    h = model.fit(x[:16], y[:16], batch_size=8, verbose=0)
    print("OK", len(h.history["loss"]), flush=True)
"""


def _stacks_of(proc):
    """The child's stderr; if it is still running (a hang), with every thread's stack first (the children
    register faulthandler on SIGUSR1): a hang seen once in a CI stand-in left no trace to find its cause."""
    import signal
    if proc.poll() is None:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        proc.wait(10)
    return proc.stderr.read()


def _read_line(proc, seconds):
    """The child's next stdout line, or None after ``seconds``."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(seconds)
    sel.close()
    return proc.stdout.readline().strip() if ready else None


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("child, times, ok", [(CTRL_C_CHILD, 30, "OK [[2.0], [2.0]]"), (FIT_CTRL_C_CHILD, 12, "OK 1")],
                         ids=["run", "fit"])
def test_ctrl_c_at_random_moments_stops_run_within_seconds_and_leaves_the_strategy_usable(child, times, ok):
    import random
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MULTIDEV_LOGICAL_CPUS="2", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", child], env=env, cwd=ROOT, text=True, bufsize=1,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rng = random.Random(18)
    try:
        assert _read_line(proc, 120) == "READY", proc.stderr.read() if proc.poll() is not None else "no READY"
        for i in range(times):
            time.sleep(rng.uniform(0.0, 0.15))
            proc.send_signal(signal.SIGINT)
            line = _read_line(proc, 60)   # seconds: a CI stand-in under full load once waited past 20; a lost result hangs for good
            assert line == ok, (i, line, proc.poll(), _stacks_of(proc))
    finally:
        proc.kill()
        proc.wait(10)


def test_a_run_on_another_thread_is_refused_and_a_stale_mark_of_this_thread_is_not():
    """Two threads driving one strategy: the second is refused while the first runs. A Ctrl-C landing
    in a run's ``finally`` before the mark was cleared (the race the Ctrl-C test above hits about once
    in a few thousand interrupts) leaves the mark behind: the same thread's next run goes ahead."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(30)
        return torch.ones(1)

    other = threading.Thread(target=lambda: strategy.run(slow))
    other.start()
    try:
        assert started.wait(30)
        with pytest.raises(RuntimeError, match="already running on another thread"):
            strategy.run(lambda: torch.ones(1))
    finally:
        release.set()
        other.join(30)
    steps = strategy.extended._runner.steps
    steps.begin(steps.steps)          # the mark an interrupted run of this thread left behind
    out = strategy.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1)))
    assert [t.tolist() for t in strategy.experimental_local_results(out)] == [[2.0], [2.0]]
    assert not steps.active
