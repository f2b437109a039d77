"""Input-pipeline benchmark: does the training loop wait for md.data batches?

Reference workload (DESIGN.md, seed 002): 8,982 examples of 300 int64 token ids with a label
in [0, 46), shuffled, batch 32 (281 steps/epoch). A training step is simulated two ways:
``sleep`` (8 ms with the GIL released, like a GPU step) and ``compute`` (torch matmuls for
8 ms of wall time, competing with the input thread for the cores and the GIL).
For each, the consumer's wait in ``next()`` is measured with and without ``prefetch``.

    python benchmarks/input_pipeline.py [--epochs 2] [--step-ms 8]
    python benchmarks/input_pipeline.py --python-map [--rounds 3]

``--python-map``: a map function whose time is Python (a word-level tokenizer over synthetic text,
as a text pipeline has it), serial vs ``num_parallel_calls=AUTOTUNE`` on worker processes (the
default "auto" choice for such a function) vs the same on threads; target >= 1.6x serial on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy
import multidev as md  # noqa: E402

EXAMPLES, LENGTH, VOCAB, CLASSES, BATCH = 8982, 300, 30982, 46, 32


def make_dataset(prefetch: bool, per_element_map: bool = False) -> md.data.Dataset:
    """The reference pipeline: slices -> shuffle -> batch (-> prefetch).

    ``per_element_map`` adds an identity ``map`` per example, which turns off the one-gather
    batching of in-memory rows: every example is then sliced, shuffled and stacked alone.
    """
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, size=(EXAMPLES, LENGTH), dtype=np.int64)
    y = rng.integers(0, CLASSES, size=(EXAMPLES,), dtype=np.int64)
    ds = md.data.Dataset.from_tensor_slices((x, y))
    if per_element_map:
        ds = ds.map(lambda tokens, label: (tokens, label))
    ds = ds.shuffle(EXAMPLES, seed=0).batch(BATCH)
    return ds.prefetch(md.data.AUTOTUNE) if prefetch else ds


def sleep_step(step_s: float):
    def step(batch):
        time.sleep(step_s)

    return step


def compute_step(step_s: float):
    """Torch matmuls until ``step_s`` has passed: a CPU-busy step of fixed wall time."""
    a = torch.randn(128, 128)

    def step(batch):
        deadline = time.perf_counter() + step_s
        while time.perf_counter() < deadline:
            a @ a

    return step


def run(ds: md.data.Dataset, step, epochs: int) -> dict:
    """Per-step wait in next() and step time, over ``epochs`` epochs (first batch excluded)."""
    waits, steps = [], []
    for _ in range(epochs):
        it = iter(ds)
        next(it)  # start-up is not steady state
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            step(batch)
            t2 = time.perf_counter()
            waits.append(t1 - t0)
            steps.append(t2 - t0)
    return {
        "steps": len(waits),
        "wait_mean_ms": 1e3 * statistics.fmean(waits),
        "wait_p95_ms": 1e3 * float(np.percentile(waits, 95)),
        "step_mean_ms": 1e3 * statistics.fmean(steps),
        "wait_pct": 100 * sum(waits) / sum(steps),
    }


def pipeline_only(ds: md.data.Dataset) -> float:
    """Batches per second the pipeline produces with no consumer work."""
    start = time.perf_counter()
    n = sum(1 for _ in ds)
    return n / (time.perf_counter() - start)


WORDS = [f"w{i}" for i in range(5000)]


def _text(i: int) -> str:
    rng = np.random.default_rng(i)
    return " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), size=1500))


def python_tokenize(index):
    """Pure-Python work per element: build the text, split, look every word up, pad to 300 ids."""
    vocab = _VOCAB
    ids = [vocab.get(word, 1) for word in _text(int(index)).split()]
    return torch.tensor((ids + [0] * LENGTH)[:LENGTH])


_VOCAB = {w: i + 2 for i, w in enumerate(WORDS)}


def python_map_speedups(elements: int, rounds: int) -> None:
    """Serial vs parallel map (processes, threads) of ``python_tokenize``; medians of ``rounds``."""
    ds = md.data.Dataset.range(elements)

    def timed(parallel, mode):
        os.environ["MULTIDEV_MAP_WORKERS"] = mode
        start = time.perf_counter()
        for _ in ds.map(python_tokenize, num_parallel_calls=parallel):
            pass
        return time.perf_counter() - start

    times = {"serial": [], "auto (processes)": [], "threads": []}
    for _ in range(rounds):       # alternating, so machine drift spreads over the variants
        times["serial"].append(timed(None, "auto"))
        times["auto (processes)"].append(timed(md.data.AUTOTUNE, "auto"))
        times["threads"].append(timed(md.data.AUTOTUNE, "threads"))
    serial = statistics.median(times["serial"])
    print(f"python map, {elements} elements of ~{1e3 * serial / elements:.2f} ms each, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}:")
    for name, samples in times.items():
        med = statistics.median(samples)
        verdict = ("  (target >= 1.6x: " + ("holds" if serial / med >= 1.6 else "MISSED") + ")") if "processes" in name else ""
        print(f"  {name:17s} {med:.2f} s  speed-up {serial / med:.2f}x{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--step-ms", type=float, default=8.0)
    parser.add_argument("--python-map", action="store_true", help="only the Python-heavy map comparison")
    parser.add_argument("--elements", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.python_map:
        python_map_speedups(args.elements, args.rounds)
        return
    step_s = args.step_ms / 1e3
    print(f"workload: {EXAMPLES} x {LENGTH} int64, shuffle({EXAMPLES}), batch {BATCH}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} (other processes compete for the cores)")
    for per_element in (False, True):
        rate = pipeline_only(make_dataset(False, per_element))
        name = "per-element map" if per_element else "in-memory rows "
        print(f"pipeline alone, {name}: {rate:.0f} batches/s ({1e3 / rate:.2f} ms/batch incl. buffer fill)")
    for per_element in (False, True):
        for kind, factory in (("sleep", sleep_step), ("compute", compute_step)):
            step = factory(step_s)
            for prefetch in (False, True):
                r = run(make_dataset(prefetch, per_element), step, args.epochs)
                name = "per-element map" if per_element else "in-memory rows "
                label = "prefetch(AUTOTUNE)" if prefetch else "no prefetch       "
                verdict = "  <5%: OK" if prefetch and r["wait_pct"] < 5 else ("  >=5%" if prefetch else "")
                print(f"{name} | {kind:7s} step | {label} | step {r['step_mean_ms']:.2f} ms | "
                      f"wait mean {r['wait_mean_ms']:.3f} ms, p95 {r['wait_p95_ms']:.3f} ms | "
                      f"wait {r['wait_pct']:.2f}% of step{verdict}")


if __name__ == "__main__":
    main()
