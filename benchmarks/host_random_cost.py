"""What per-replica host random streams cost (``distribute/host_random.py``), on 2 logical-CPU replicas.

Per call: ``random.random``, ``random.randint``, ``np.random.rand`` and ``np.random.beta`` with no
strategy, in the caller while a strategy lives (one context-variable read more), and inside each
replica (replica 0 draws from the shared object, replica 1 from its copy). Per run: ``strategy.run``
of a step drawing once from ``random`` and once from ``np.random`` (the run's first draws fork the
states), with the replicas' streams and without them (every replica on the shared state, as before),
alternating blocks, median.

    OMP_NUM_THREADS=1 python benchmarks/host_random_cost.py [--runs 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import timeit

import numpy as np

import multidev as md
from multidev.distribute import host_random

_CALLS = {"random.random()": lambda: random.random(), "random.randint(0, 99)": lambda: random.randint(0, 99),
          "np.random.rand()": lambda: np.random.rand(), "np.random.beta(.4, .4)": lambda: np.random.beta(.4, .4)}


def _per_call(number: int = 20000) -> dict[str, float]:
    return {name: min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9 for name, fn in _CALLS.items()}


def _per_run(strategy, runs: int) -> float:
    def step():
        random.random()
        np.random.rand()
    start = time.perf_counter()
    for _ in range(runs):
        strategy.run(step)
    return (time.perf_counter() - start) / runs * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args(argv)
    rows = {"no strategy": _per_call()}
    md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                               [md.config.LogicalDeviceConfiguration()] * 2)
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    rows["caller, strategy alive"] = _per_call()
    inside: dict = {}
    first_done = threading.Event()

    def measure():   # one replica after the other (not sharing the cores)
        rid = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        if rid:
            first_done.wait(600)
        inside[f"in replica {rid}"] = _per_call()
        first_done.set()
    strategy.run(measure)
    rows.update(sorted(inside.items()))
    for label, row in rows.items():
        print(f"{label:24s} " + "  ".join(f"{name} {ns:6.0f} ns" for name, ns in row.items()), flush=True)

    original = host_random.HostStreams.scope
    times: dict[str, list] = {"with streams": [], "without": []}
    _per_run(strategy, 30)   # warm up
    for _ in range(args.blocks):
        for label in times:
            host_random.HostStreams.scope = original if label == "with streams" else (lambda self, r: None)
            times[label].append(_per_run(strategy, args.runs // args.blocks))
    host_random.HostStreams.scope = original
    w, wo = (statistics.median(times[k]) for k in ("with streams", "without"))
    print(f"strategy.run of a step drawing once from random and np.random: {w:.0f} us with per-replica streams, "
          f"{wo:.0f} us without ({w - wo:+.0f} us per run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
