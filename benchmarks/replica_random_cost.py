"""What per-replica random streams cost (issue 23, item 5): a step with and without the replica's
random-op mode (``placement/replica_random.py``), on 2 logical-CPU replicas.

Two torch models trained with SGD inside ``strategy.run``: a dropout-heavy MLP (a dropout after each of
4 layers: every layer's draw takes the lock and swaps the generator state) and the same MLP without
dropout (the mode only passes ops through). Alternating blocks of steps, median per-step time.

    OMP_NUM_THREADS=1 python benchmarks/replica_random_cost.py [--steps 200] [--width 256]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import multidev as md
from multidev.placement import replica_random


def _model(width: int, dropout: float) -> torch.nn.Module:
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()] + ([torch.nn.Dropout(dropout)] if dropout else [])
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def _time_steps(strategy, model, optimizer, x, y, steps: int) -> float:
    def step(x, y):
        optimizer.zero_grad()
        loss = md.nn.compute_average_loss(torch.nn.functional.cross_entropy(model(x), y, reduction="none"))
        loss.backward()
        optimizer.step()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        strategy.run(step, args=(x, y))
    return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args(argv)
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x, y = [strategy.experimental_distribute_values_from_function(
        lambda ctx, t=t: t.chunk(2)[ctx.replica_id_in_sync_group]) for t in (torch.randn(args.batch, args.width), torch.randint(0, 10, (args.batch,)))]
    original = replica_random.ReplicaStreams.mode_for
    for dropout in (0.5, 0.0):
        with strategy.scope():
            model = _model(args.width, dropout)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        times = {"with streams": [], "without": []}
        _time_steps(strategy, model, optimizer, x, y, 20)   # warm up
        for _ in range(args.blocks):
            for label in times:
                replica_random.ReplicaStreams.mode_for = original if label == "with streams" else (lambda self, r: None)
                times[label].append(_time_steps(strategy, model, optimizer, x, y, args.steps // args.blocks))
        replica_random.ReplicaStreams.mode_for = original
        for i, what in enumerate(("wall", "CPU")):
            w, wo = (statistics.median(t[i] for t in times[k]) * 1e3 for k in ("with streams", "without"))
            print(f"MLP 4x{args.width} {'dropout 0.5' if dropout else 'no dropout '} batch {args.batch}: {what} "
                  f"{w:.3f} ms/step with per-replica streams, {wo:.3f} ms without ({(w / wo - 1) * 100:+.1f}%)",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
