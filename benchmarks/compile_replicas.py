"""torch.compile on replicas (issue 23, item 10): a compiled model's step against the uncompiled one,
on 2 logical-CPU replicas of MirroredStrategy, on one device, and under DDP (2 Gloo processes).

Per-step process CPU time (all threads; steadier than wall time on a shared machine) and wall time,
median of alternating blocks, after a warm-up that compiles. Also the graph breaks of the compiled
forward inside a replica (``torch._dynamo.explain``): none are expected (the replica's parameters are
read through a guarded thread-local, ``values/context._TracedReplica``).

    OMP_NUM_THREADS=1 python benchmarks/compile_replicas.py [--steps 60] [--width 512]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

import torch


def _model(width: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), *layers, torch.nn.Linear(width, 10))


def _step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y, reduction="sum") / 64.0
    loss.backward()
    optimizer.step()
    return loss.detach()


def _blocks(runners: dict, steps: int, blocks: int) -> dict:
    """``label -> (median CPU ms/step, median wall ms/step)`` over alternating blocks."""
    times = {label: [] for label in runners}
    for run in runners.values():
        run(3)                                    # warm up (and compile)
    for _ in range(blocks):
        for label, run in runners.items():
            start, cpu = time.perf_counter(), time.process_time()
            run(steps // blocks)
            times[label].append(((time.process_time() - cpu) / (steps // blocks) * 1e3,
                                 (time.perf_counter() - start) / (steps // blocks) * 1e3))
    return {k: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for k, v in times.items()}


def multidev_figures(width: int, steps: int, blocks: int) -> dict:
    import multidev as md

    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 64, generator=g), torch.randint(0, 10, (64,), generator=g)
    runners = {}
    for compiled in (False, True):
        with strategy.scope():
            model = _model(width)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        forward = torch.compile(model) if compiled else model
        parts = [strategy.experimental_distribute_values_from_function(
            lambda ctx, t=t: t.chunk(2)[ctx.replica_id_in_sync_group]) for t in (x, y)]
        runners[f"2 replicas {'compiled' if compiled else 'eager'}"] = (
            lambda n, f=forward, o=optimizer: [strategy.run(_step, args=(f, o, *parts)) for _ in range(n)])
        model1 = _model(width)
        optimizer1 = torch.optim.SGD(model1.parameters(), lr=0.01, momentum=0.9)
        forward1 = torch.compile(model1) if compiled else model1
        runners[f"1 device {'compiled' if compiled else 'eager'}"] = (
            lambda n, f=forward1, o=optimizer1: [_step(f, o, x, y) for _ in range(n)])
    figures = _blocks(runners, steps, blocks)
    with strategy.scope():
        probe = _model(width)
    lock = threading.Lock()   # explain patches torch internals: one replica at a time

    def explain(xb):
        with lock:
            return torch._dynamo.explain(probe)(xb)

    explained = strategy.run(explain, args=(
        strategy.experimental_distribute_values_from_function(lambda ctx: x.chunk(2)[ctx.replica_id_in_sync_group]),))
    explanation = explained.values[1]
    print(f"explain in replica 1: {explanation.graph_count} graph(s), {explanation.graph_break_count} break(s) "
          f"{[str(b.reason)[:80] for b in explanation.break_reasons]}")
    return figures


def _ddp_rank(rank: int, port: int, width: int, steps: int, blocks: int, compiled: bool) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 64, generator=g).chunk(2)[rank], torch.randint(0, 10, (64,), generator=g).chunk(2)[rank]
    model = DistributedDataParallel(_model(width))
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    figures = _blocks({"ddp": lambda n: [_step(forward, optimizer, x, y) for _ in range(n)]}, steps, blocks)
    if rank == 0:
        cpu, wall = figures["ddp"]
        print(f"DDP {'compiled' if compiled else 'eager'} {cpu:.3f} {wall:.3f}", flush=True)
    dist.destroy_process_group()


def ddp_figures(width: int, steps: int, blocks: int) -> dict:
    """``label -> (rank 0's CPU ms/step x 2 ranks, wall ms/step)`` (each rank is its own process)."""
    out = {}
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for compiled in (False, True):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv = [sys.executable, __file__, "--ddp-rank", "{r}", "--port", str(port), "--width", str(width),
                "--steps", str(steps), "--blocks", str(blocks)] + (["--compiled"] if compiled else [])
        procs = [subprocess.Popen([a.format(r=r) for a in argv], env=env, stdout=subprocess.PIPE, text=True)
                 for r in range(2)]
        text = procs[0].communicate(timeout=900)[0]
        procs[1].wait(timeout=60)
        _, kind, cpu, wall = next(line for line in text.splitlines() if line.startswith("DDP")).split()
        out[f"DDP 2 processes {kind}"] = (2 * float(cpu), float(wall))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--ddp-rank", type=int, default=None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--compiled", action="store_true")
    parser.add_argument("--no-ddp", action="store_true")
    args = parser.parse_args(argv)
    if args.ddp_rank is not None:
        _ddp_rank(args.ddp_rank, args.port, args.width, args.steps, args.blocks, args.compiled)
        return 0
    figures = multidev_figures(args.width, args.steps, args.blocks)
    if not args.no_ddp:
        figures.update(ddp_figures(args.width, args.steps, args.blocks))
    print(f"MLP 64 -> 5 x {args.width} -> 10, global batch 64, SGD momentum; ms/step (CPU time of all threads, wall):")
    for label, (cpu, wall) in figures.items():
        print(f"  {label:28s} CPU {cpu:8.3f}   wall {wall:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
