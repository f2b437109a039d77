"""Per-step time of the ported PyTorch programs (tests/programs/programs.py): multidev's
MirroredStrategy on 2 logical CPUs of one process against torch DDP on 2 Gloo processes, the same
program code, the same global batches. The two runs take turns (never at the same time).

    python benchmarks/torch_programs.py --steps 30 --batch 64

Prints a table (wall and CPU ms per step, ratios multidev / DDP; medians of alternating rounds) and,
with --json, writes the numbers. On a loaded machine the CPU columns are the steadier ones.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS_DIR = os.path.join(ROOT, "tests", "programs")


def _programs(batch: int):
    sys.path.insert(0, PROGRAMS_DIR)
    import programs   # the test programs, plain torch

    programs.GLOBAL_BATCH = batch
    return programs


def _time_steps(run_step, batches, steps: int, warmup: int) -> tuple[float, float]:
    """(wall ms, this process's CPU ms, all threads) per step."""
    for i in range(warmup):
        run_step(batches[i % len(batches)])
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        run_step(batches[i % len(batches)])
    return (time.perf_counter() - start) / steps * 1e3, (time.process_time() - cpu) / steps * 1e3


def child_multidev(args, out: str) -> None:
    import torch

    import multidev as md

    programs = _programs(args.batch)
    strategy = md.distribute.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    results = {}
    for program in programs.PROGRAMS:
        with strategy.scope():
            state = program.build()
        initial = program.initial_carry(args.batch // n)
        carry = [None if initial is None else tuple(md.distribute.PerReplica((t.clone(), t.clone())) for t in initial)]

        def run_step(batch, state=state, carry=carry, program=program):
            parts = tuple(md.distribute.PerReplica(tuple(torch.tensor_split(t, n))) for t in batch)
            _, carry[0] = strategy.run(program.step, args=(state, parts, carry[0]))

        results[program.name] = _time_steps(run_step, program.batches(), args.steps, args.warmup)
    with open(os.path.join(out, "multidev.json"), "w") as f:
        json.dump(results, f)


def child_ddp(args, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    programs = _programs(args.batch)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {}
    for program in programs.PROGRAMS:
        state = program.build()
        for name in program.models:
            state[name] = DDP(state[name])
        carry = [program.initial_carry(args.batch // world)]

        def run_step(batch, state=state, carry=carry, program=program):
            mine = tuple(torch.tensor_split(t, world)[rank] for t in batch)
            _, carry[0] = program.step(state, mine, carry[0])

        dist.barrier()
        wall, cpu = _time_steps(run_step, program.batches(), args.steps, args.warmup)
        both = torch.tensor([wall, cpu], dtype=torch.float64)
        dist.all_reduce(both)   # wall: the mean of the ranks'; CPU: both processes together
        results[program.name] = (float(both[0]) / world, float(both[1]))
    if rank == 0:
        with open(os.path.join(out, "ddp.json"), "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def _run(cmd: list, envs: list, timeout: float) -> None:
    procs = [subprocess.Popen(cmd, env=env, cwd=ROOT) for env in envs]
    try:
        for p in procs:
            if p.wait(timeout=timeout) != 0:
                raise SystemExit(f"{cmd} failed with {p.returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64, help="global batch (even)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", choices=["multidev", "ddp"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "multidev":
        return child_multidev(args, args.out)
    if args.child == "ddp":
        return child_ddp(args, args.out)
    base = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    rounds: dict = {"multidev": [], "ddp": []}
    with tempfile.TemporaryDirectory() as out:
        common = [sys.executable, os.path.abspath(__file__), "--steps", str(args.steps), "--warmup", str(args.warmup),
                  "--batch", str(args.batch), "--out", out]
        for _ in range(args.rounds):   # alternate, so a busy spell of the machine hits both
            _run(common + ["--child", "multidev"], [dict(base, MULTIDEV_LOGICAL_CPUS="2")], 1800)
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
            _run(common + ["--child", "ddp"], [dict(base, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                                      MASTER_PORT=port) for r in range(2)], 1800)
            for kind in rounds:
                with open(os.path.join(out, f"{kind}.json")) as f:
                    rounds[kind].append(json.load(f))
    median = {kind: {name: [statistics.median(r[name][k] for r in runs) for k in (0, 1)] for name in runs[0]}
              for kind, runs in rounds.items()}
    ours, ddp = median["multidev"], median["ddp"]
    print("| program | multidev wall ms/step | DDP wall ms/step | wall ratio | multidev CPU ms/step | DDP CPU ms/step "
          "(both processes) | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in ours.items():
        dwall, dcpu = ddp[name]
        print(f"| {name} | {wall:.2f} | {dwall:.2f} | {wall / dwall:.2f} | {cpu:.2f} | {dcpu:.2f} | {cpu / dcpu:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"median": median, "rounds": rounds, "batch": args.batch, "steps": args.steps}, f, indent=1)


if __name__ == "__main__":
    main()
