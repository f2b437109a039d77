"""A parallel ``map`` leaves the program's random stream where a seeded program expects it, whichever workers
it picked: ``auto`` picks threads or processes by timing its first calls, and processes seeded themselves with
a draw from torch's default generator while threads drew nothing, so the weights a model initialised after the
first batch (keras.io's reproducibility recipe: ``set_random_seed(812)``, ``Dataset.shuffle().batch().map(...,
num_parallel_calls=AUTOTUNE).prefetch()``, a ``Sequential`` built on its first batch) changed from run to run."""

from __future__ import annotations

import pytest
import torch

import multidev as md


def _double(x):
    return x * 2


def _stream_after_a_pass(mode, monkeypatch, cardinality=12):
    monkeypatch.setenv("MULTIDEV_MAP_WORKERS", mode)
    ds = md.data.Dataset.range(cardinality).map(_double, num_parallel_calls=md.data.AUTOTUNE)
    torch.manual_seed(812)
    values = [int(v) for v in ds]
    assert values == [2 * i for i in range(cardinality)]
    return torch.rand(3).tolist()


@pytest.mark.parametrize("cardinality", [12, 1])
def test_the_stream_after_a_parallel_map_is_the_same_on_threads_and_processes(monkeypatch, cardinality):
    threads = _stream_after_a_pass("threads", monkeypatch, cardinality)
    assert _stream_after_a_pass("processes", monkeypatch, cardinality) == threads
    assert _stream_after_a_pass("auto", monkeypatch, cardinality) == threads


def test_prefetched_parallel_map_then_a_lazily_built_model_reproduces_under_a_seed(monkeypatch):
    monkeypatch.setenv("MULTIDEV_MAP_WORKERS", "processes")   # what `auto` picks for Python-bound calls
    x = torch.arange(64, dtype=torch.float32).reshape(16, 4) / 64

    def weights_after_one_epoch(mode):
        monkeypatch.setenv("MULTIDEV_MAP_WORKERS", mode)
        md.keras.utils.set_random_seed(812)
        ds = (md.data.Dataset.from_tensor_slices((x, x[:, :1])).shuffle(16).batch(4)
              .map(lambda a, b: (a * 1.0, b), num_parallel_calls=md.data.AUTOTUNE).prefetch(md.data.AUTOTUNE))
        model = md.keras.Sequential([md.keras.layers.Dense(3), md.keras.layers.Dropout(0.5), md.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(ds, epochs=1, verbose=0)
        return [w.detach().clone() for w in model.weights]

    threads = weights_after_one_epoch("threads")
    for got in (weights_after_one_epoch("processes"), weights_after_one_epoch("threads")):
        assert all(torch.equal(a, b) for a, b in zip(threads, got))


@pytest.fixture
def op_determinism():
    md.config.experimental.enable_op_determinism()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)   # torch's global switch: leave the other tests as they were


def _augmented_and_model_draws(parallel, prefetch):
    """keras.io's augmentation idiom (a random draw in ``map``) read while the program draws too (Dropout)."""
    md.keras.utils.set_random_seed(812)
    ds = md.data.Dataset.from_tensor_slices(torch.ones(32, 2)).batch(4)
    ds = ds.map(lambda x: x * md.keras.random.uniform(()), num_parallel_calls=parallel)
    if prefetch is not None:
        ds = ds.prefetch(prefetch)
    seen = []
    for epoch in range(2):
        for batch in ds:
            seen.append(float(batch[0, 0]))
            seen.append(float(torch.rand(())))   # the model's draw between batches
    return seen


@pytest.mark.parametrize("parallel,prefetch", [(md.data.AUTOTUNE, md.data.AUTOTUNE), (4, 2), (None, 1)])
def test_under_op_determinism_a_random_map_gives_the_serial_pipelines_draws(op_determinism, parallel, prefetch):
    # TensorFlow runs a map with random ops serially and stops prefetching under enable_op_determinism
    serial = _augmented_and_model_draws(None, None)
    assert _augmented_and_model_draws(parallel, prefetch) == serial
    assert _augmented_and_model_draws(parallel, prefetch) == serial   # and again: the same run after run
