"""Where the scaling probe's step spends its Python: ``python -m multidev.bench.scaling_profile``.

Runs the probe (``scaling_model``) under ``MirroredStrategy`` on N logical CPUs in this process and
reports (a) the CPU time per step (``time.process_time``: every thread, so the other processes on a
shared machine barely move it; median over blocks of steps) and (b) a cProfile of the caller and of
every replica thread, summed per function: multidev's own functions by ``tottime`` per step. With
several replicas cProfile charges a thread's wait for the GIL to the function it waits in, so the
profile ranks the functions rather than measuring them (``benchmarks/replica_python_cost.py``
measures: it switches costs off one at a time).

    python -m multidev.bench.scaling_profile --replicas 2 4 --steps 200 --top 25
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time

import torch

from multidev.bench import scaling_model
from multidev.bench.train_inprocess import configure_devices
from multidev.values.context import current_replica_id


def build(n: int, names: list[str]):
    """``(strategy, step(x, y))`` for the probe on the first ``n`` devices of ``names``."""
    import multidev as md

    strategy = md.distribute.MirroredStrategy(names[:n])
    with strategy.scope():
        net = scaling_model.model()
        opt = scaling_model.optimizer(net.parameters())
    step = scaling_model.train_step(net, opt)

    def one(x, y):
        parts = (md.distribute.PerReplica(torch.tensor_split(x, n)), md.distribute.PerReplica(torch.tensor_split(y, n))) \
            if n > 1 else (x, y)
        strategy.run(step, args=parts)

    return strategy, one


def cpu_per_step(one, batches, blocks: int) -> dict:
    """Median (and spread) of CPU and wall microseconds per step over ``blocks`` passes over ``batches``."""
    cpu, wall = [], []
    for _ in range(blocks):
        c0, w0 = time.process_time(), time.perf_counter()
        for x, y in batches:
            one(x, y)
        cpu.append((time.process_time() - c0) / len(batches) * 1e6)
        wall.append((time.perf_counter() - w0) / len(batches) * 1e6)
    return {"cpu_us": statistics.median(cpu), "cpu_min_us": min(cpu), "wall_us": statistics.median(wall)}


def profile(strategy, one, batches, n: int) -> pstats.Stats:
    """cProfile of the caller and of each replica thread over one pass of ``batches``. Before Python
    3.12 a profiler sees only the thread that enabled it, so each replica thread enables its own;
    from 3.12 on cProfile uses ``sys.monitoring``, which sees every thread (and allows one profiler)."""
    per_thread = n > 1 and sys.version_info < (3, 12)
    profs = [cProfile.Profile() for _ in range(n)] if per_thread else []
    if per_thread:
        strategy.run(lambda: profs[current_replica_id()].enable())
    main = cProfile.Profile()
    main.enable()
    for x, y in batches:
        one(x, y)
    main.disable()
    if per_thread:
        strategy.run(lambda: profs[current_replica_id()].disable())
    stats = pstats.Stats(main)
    for p in profs:
        stats.add(p)
    return stats


def report(stats: pstats.Stats, steps: int, top: int, match: str = "multidev") -> list[str]:
    """The ``top`` functions whose file path contains ``match``, by own time, in us per step."""
    rows = []
    for (path, line, name), (cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        if match in path:
            rows.append((tt / steps * 1e6, ct / steps * 1e6, nc / steps, f"{path.split('multidev/')[-1]}:{line}({name})"))
    rows.sort(reverse=True)
    lines = [f"{'own us/step':>11} {'cum us/step':>11} {'calls/step':>10}  function"]
    lines += [f"{tt:11.1f} {ct:11.1f} {nc:10.1f}  {where}" for tt, ct, nc, where in rows[:top]]
    lines.append(f"{sum(r[0] for r in rows):11.1f} {'':11} {'':10}  total own time of {match} functions")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=100, help="steps per timed block and in the profile")
    parser.add_argument("--blocks", type=int, default=9, help="timed blocks (median)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names, _ = configure_devices(max(args.replicas), "cpu")
    for n in args.replicas:
        strategy, one = build(n, names)
        batches = scaling_model.batches(args.steps, scaling_model.PER_REPLICA_BATCH * n)
        for x, y in batches[:10]:
            one(x, y)
        t = cpu_per_step(one, batches, args.blocks)
        print(f"N={n}: CPU {t['cpu_us']:.0f} us/step (min {t['cpu_min_us']:.0f}), wall {t['wall_us']:.0f} us/step "
              f"(median of {args.blocks} x {args.steps} steps)")
        if not args.no_profile:
            stats = profile(strategy, one, batches, n)
            print("\n".join(report(stats, args.steps, args.top)))
            print()


if __name__ == "__main__":
    main()
