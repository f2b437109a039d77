"""Where a variant's step time goes: cProfile of N steps of one in-process variant, top functions
with microseconds per step (own time and cumulative), in a child configured with 4 logical CPUs.

cProfile sees one thread: the caller's for one replica, replica 0's thread for several (other
replicas' threads are not profiled). It counts that thread's CPU time, so other processes
competing for the cores barely move it; ``--wall`` counts wall time instead (waits show).

    python benchmarks/profile_step.py --workload text_conv --variant mirrored_1 [--steps 100] [--top 25]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy

import torch  # noqa: E402

from multidev.bench import variants, workloads  # noqa: E402
from multidev.bench.train_inprocess import configure_devices  # noqa: E402


def profile(workload: str, variant: str, steps: int, warmup: int, sort: str, top: int, wall: bool = False) -> str:
    names, device = configure_devices(4, "cpu")
    w = workloads.get(workload)
    built = variants.build(variant, w, names, device)
    batches = w.batches(steps)
    built.run(batches[:warmup])
    # CPU time of this thread (other processes' load does not count), or wall time (waits at barriers show)
    profiler = cProfile.Profile(time.perf_counter if wall else time.thread_time)
    with _profiling(profiler, built.strategy):
        seconds, _ = built.run(batches)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats(sort)
    header = f"{workload} / {variant}: {seconds * 1e3:.2f} ms/step under cProfile, {steps} steps, torch threads {torch.get_num_threads()}\n"
    rows, ours = [], []
    for (filename, line, func), (cc, nc, tt, ct, _) in stats.stats.items():
        row = (tt if sort == "tottime" else ct, tt, ct, nc, f"{_short(filename)}:{line}({func})")
        rows.append(row)
        if "/multidev/" in filename and "/multidev/bench/" not in filename:
            ours.append(row)
    own_total = sum(r[1] for r in ours) / steps * 1e6
    return (header + _table(rows, steps, top) + f"\n\nmultidev's own Python time: {own_total:.0f} us/step "
            f"({len(ours)} functions); top of them:\n" + _table(ours, steps, top))


@contextlib.contextmanager
def _profiling(profiler: cProfile.Profile, strategy):
    """Profile the thread that runs replica 0: the caller's, or its own thread with several replicas."""
    import multidev as md

    if strategy is None or strategy.num_replicas_in_sync == 1:
        profiler.enable()
        yield
        profiler.disable()
        return

    def toggle(on: bool):
        if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
            profiler.enable() if on else profiler.disable()

    strategy.run(toggle, args=(True,))  # a profiler enabled in a thread stays on there between runs
    yield
    strategy.run(toggle, args=(False,))


def _short(filename: str) -> str:
    parts = Path(filename).parts
    return "/".join(parts[parts.index("multidev"):]) if "multidev" in parts else Path(filename).name


def _table(rows: list, steps: int, top: int) -> str:
    rows = sorted(rows, reverse=True)
    table = [f"{'own us/step':>12} {'cum us/step':>12} {'calls/step':>10}  function"]
    for _, tt, ct, nc, name in rows[:top]:
        table.append(f"{tt / steps * 1e6:12.1f} {ct / steps * 1e6:12.1f} {nc / steps:10.1f}  {name}")
    return "\n".join(table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="text_conv", choices=sorted(workloads.WORKLOADS))
    parser.add_argument("--variant", default="mirrored_1", choices=variants.INPROCESS_VARIANTS)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--sort", choices=("tottime", "cumulative"), default="tottime")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--wall", action="store_true", help="wall time instead of the thread's CPU time")
    args = parser.parse_args(argv)
    print(profile(args.workload, args.variant, args.steps, args.warmup, args.sort, args.top, args.wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
