"""``map(num_parallel_calls=...)`` on worker processes (``multidev.data.processes``): input order,
determinism under a seed, errors raised in the consumer, lazy reading of infinite input, workers
gone after early stops, and the choice between threads and processes."""

from __future__ import annotations

import multiprocessing
import time

import pytest
import torch

import multidev as md
from multidev.data import processes


@pytest.fixture
def on_processes(monkeypatch):
    monkeypatch.setenv("MULTIDEV_MAP_WORKERS", "processes")


def _python_work(x):
    total = 0
    for i in range(2000):
        total += i % 7
    return x * 2, torch.tensor(total)


def test_parallel_map_on_processes_keeps_order_and_values(on_processes):
    ds = md.data.Dataset.range(50).map(_python_work, num_parallel_calls=md.data.AUTOTUNE)
    assert [int(a) for a, _ in ds] == [2 * i for i in range(50)]
    assert all(int(b) == sum(i % 7 for i in range(2000)) for _, b in ds)
    assert [a.tolist() for a, _ in ds.batch(8)][0] == [0, 2, 4, 6, 8, 10, 12, 14]   # batching still works


def test_random_draws_are_the_same_for_the_same_seed(on_processes):
    ds = md.data.Dataset.range(40).map(lambda x: torch.rand(()), num_parallel_calls=4)
    torch.manual_seed(0)
    first = [float(v) for v in ds]
    torch.manual_seed(0)
    assert [float(v) for v in ds] == first and len(set(first)) == 40
    torch.manual_seed(1)
    assert [float(v) for v in ds] != first


def test_an_error_in_a_worker_is_raised_in_the_consumer_with_its_type(on_processes):
    def bad(x):
        if int(x) == 30:
            raise KeyError(f"element {int(x)}")
        return x

    with pytest.raises(KeyError, match="element 30") as info:
        list(md.data.Dataset.range(40).map(bad, num_parallel_calls=4))
    assert "map worker process" in str(info.value.__cause__) and "bad" in str(info.value.__cause__)


def test_infinite_input_is_read_lazily_and_workers_end_with_the_iterator(on_processes):
    before = len(multiprocessing.active_children())
    it = iter(md.data.Dataset.counter().map(lambda x: x + 1, num_parallel_calls=2))
    assert [int(next(it)) for _ in range(5)] == [1, 2, 3, 4, 5]
    del it
    deadline = time.monotonic() + 10
    while len(multiprocessing.active_children()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(multiprocessing.active_children()) <= before


def test_auto_picks_threads_for_cheap_calls_and_processes_for_python_heavy_ones(monkeypatch):
    assert processes.choose_processes("auto", 5e-3, busy_fraction=0.95) is processes.available()
    assert processes.choose_processes("auto", 5e-3, busy_fraction=0.05) is False     # sleeps: threads do
    assert processes.choose_processes("auto", 1e-5) is False
    assert processes.choose_processes("threads", 1.0) is False
    assert processes.chunk_size(1e-3) == 10 and processes.chunk_size(1e-7) == 256 and processes.chunk_size(1.0) == 1
    with pytest.raises(ValueError, match="MULTIDEV_MAP_WORKERS must be 'auto', 'threads' or 'processes', got 'gpu'"):
        processes.choose_processes("gpu", 1.0)
    monkeypatch.setenv("MULTIDEV_MAP_WORKERS", "gpu")
    with pytest.raises(ValueError, match="MULTIDEV_MAP_WORKERS"):
        list(md.data.Dataset.range(5).map(lambda x: x, num_parallel_calls=2))


def test_short_inputs_never_start_workers(on_processes):
    before = len(multiprocessing.active_children())
    assert [int(v) for v in md.data.Dataset.range(2).map(lambda x: x * 3, num_parallel_calls=4)] == [0, 3]
    assert len(multiprocessing.active_children()) == before


Pair = __import__("collections").namedtuple("Pair", "a b")   # module level: pickled by reference


def test_elements_cross_the_process_boundary_intact():
    import pickle

    pair = Pair
    chunks = [[torch.tensor(i) for i in range(5)],                                  # columnar: one array
              [(torch.ones(2) * i, {"k": torch.tensor(i)}) for i in range(3)],
              [torch.ones(i) for i in range(1, 4)],                                 # ragged: one by one
              [pair(torch.tensor(1), torch.tensor(2.0))] * 2,
              [(torch.ones(2, dtype=torch.bfloat16), "text")], []]
    for chunk in chunks:
        back = processes._unpack_chunk(pickle.loads(pickle.dumps(processes._pack_chunk(chunk))))
        assert len(back) == len(chunk)
        for got, want in zip(back, chunk):
            assert type(got) is type(want) and repr(got) == repr(want)
