"""Background work in map(num_parallel_calls) and prefetch: order, errors, no leftover threads."""

import gc
import os
import threading
import time
import traceback

import pytest

import multidev as md

D = md.data.Dataset


def data_threads():
    return [t for t in threading.enumerate() if t.name.startswith("md.data")]


def wait_no_data_threads(timeout=5.0):
    deadline = time.monotonic() + timeout
    while data_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return data_threads()


@pytest.mark.parametrize("calls", [2, 4, md.data.AUTOTUNE])
def test_parallel_map_keeps_order(calls):
    def slow_square(x):
        time.sleep(0.001 * (int(x) % 3))
        return x * x

    ds = D.range(40).map(slow_square, num_parallel_calls=calls)
    assert [x.item() for x in ds] == [i * i for i in range(40)]
    assert wait_no_data_threads() == []


def test_parallel_map_runs_on_several_threads():
    names = set()

    def record(x):
        names.add(threading.current_thread().name)
        time.sleep(0.002)
        return x

    list(D.range(32).map(record, num_parallel_calls=4))
    workers = names - {threading.main_thread().name}      # the first 2 calls are timed in the consumer
    assert len(workers) > 1 and all(n.startswith("md.data.map") for n in workers)


def test_prefetch_runs_upstream_on_a_background_thread():
    where = []
    ds = D.range(3).map(lambda x: where.append(threading.current_thread().name) or x).prefetch(2)
    assert [x.item() for x in ds] == [0, 1, 2]
    assert set(where) == {"md.data.prefetch"}


class Boom(Exception):
    pass


def explode(x):
    if int(x) == 5:
        raise Boom(f"bad element {int(x)}")
    return x


@pytest.mark.parametrize("build", [
    lambda: D.range(10).map(explode, num_parallel_calls=3),
    lambda: D.range(10).map(explode).prefetch(2),
    lambda: D.range(10).map(explode, num_parallel_calls=2).batch(2).prefetch(md.data.AUTOTUNE),
])
def test_map_exception_reaches_consumer_with_original_traceback(build):
    seen = []
    with pytest.raises(Boom, match="bad element 5") as info:
        for x in build():
            seen.append(x)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "explode" in frames  # the frame that raised is kept
    assert wait_no_data_threads() == []


def test_no_threads_left_after_exhaustion():
    ds = D.range(50).map(lambda x: x, num_parallel_calls=4).prefetch(4).map(lambda x: x, num_parallel_calls=2)
    assert len(list(ds)) == 50
    assert wait_no_data_threads() == []


def test_no_threads_left_after_break():
    ds = D.range(1000).map(lambda x: x, num_parallel_calls=4).prefetch(8)
    for i, _ in enumerate(ds):
        if i == 3:
            assert data_threads()  # the pipeline is running in the background
            break
    gc.collect()
    assert wait_no_data_threads() == []


def test_no_threads_left_after_close_and_garbage_collection():
    it = iter(D.range(10**6).prefetch(2).repeat())
    next(it)
    it.close()
    assert wait_no_data_threads() == []
    it = iter(D.range(10**6).map(lambda x: x, num_parallel_calls=2))
    next(it)
    del it
    gc.collect()
    assert wait_no_data_threads() == []


def test_infinite_prefetched_pipeline_stops_on_take():
    ds = D.range(3).repeat().map(lambda x: x + 1, num_parallel_calls=2).prefetch(2).take(5)
    assert [x.item() for x in ds] == [1, 2, 3, 1, 2]
    assert wait_no_data_threads() == []


def test_prefetch_buffer_validation():
    with pytest.raises(md.errors.InvalidArgumentError, match="buffer_size=-5"):
        D.range(3).prefetch(-5)
    assert [x.item() for x in D.range(3).prefetch(0)] == [0, 1, 2]


def test_num_parallel_calls_validation():
    with pytest.raises(md.errors.InvalidArgumentError, match="num_parallel_calls"):
        D.range(3).map(lambda x: x, num_parallel_calls=0)


@pytest.mark.parametrize("calls", [10**4, 10**7])
def test_huge_num_parallel_calls_starts_at_most_the_core_count_of_threads(calls):
    # Issue 18 item 9: num_parallel_calls=10**4 started 10,001 threads (10**7: nothing within 30 s).
    cap = max(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    peak = []

    def record(x):
        peak.append(len(data_threads()))
        return x * 2

    ds = D.range(10**6).map(record, num_parallel_calls=calls).take(200)
    assert [x.item() for x in ds] == [2 * i for i in range(200)]
    assert 1 < max(peak) <= cap + 1, (max(peak), cap)       # the workers and one feeder thread
    assert wait_no_data_threads() == []


def test_parallel_map_threads_follow_private_threadpool_size_and_the_element_count():
    peak = []

    def record(x):
        peak.append(len(data_threads()))
        return x

    options = md.data.Options()
    options.threading.private_threadpool_size = 3
    list(D.range(100).map(record, num_parallel_calls=50).with_options(options))
    assert max(peak) <= 3 + 1
    peak.clear()
    list(D.range(2).map(record, num_parallel_calls=50))   # two elements need no more than two threads
    assert max(peak) <= 2 + 1
