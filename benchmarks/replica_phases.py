"""Where a 2-replica MirroredStrategy step spends its time beyond the plain loop's (issue 28 item 4).

Three measurements in one process (2 logical CPUs), each printed as medians over alternating rounds:

* ``split``: the data-parallel compute floor with no multidev and no threads: one thread runs the
  workload's forward+backward on the global batch, then on its two halves one after the other. Their
  ratio is what splitting the batch costs the matrix kernels on this CPU (BLAS efficiency at half the
  rows), which no strategy can avoid;
* ``phases``: thread CPU time per replica of a ``mirrored_2`` custom-loop step (forward, backward,
  optimizer step), and inside them multidev's own work, timed by wrapping it: the reduction in
  ``loss.backward()`` (``BackwardReducer._finish``), the split update's copies to the other replica
  (``SplitPlan._copy_out``) and every meeting of the replicas (``Rendezvous.exchange``, wall time);
  next to the same phases of the plain loop on one thread;
* ``threads``: wall and process CPU per step of the plain loop and of ``mirrored_2`` with 1 and 2
  torch intra-op threads per replica (multidev's choice: torch's threads divided by the CPU replicas).

Thread CPU barely moves when other processes load the machine; wall time does (see RESULTS.md).

    PYTHONPATH=. python benchmarks/replica_phases.py [--workload mlp] [--steps 10] [--rounds 7] [--only split,phases,threads]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy

import torch  # noqa: E402

import multidev as md  # noqa: E402
from multidev.bench import variants, workloads  # noqa: E402
from multidev.bench.train_inprocess import configure_devices  # noqa: E402
from multidev.values import context  # noqa: E402

_med = statistics.median


def split_floor(w: workloads.Workload, steps: int, rounds: int) -> str:
    """Thread CPU of forward+backward on the global batch vs its two halves in turn, one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, loss_fn = w.model(), torch.nn.CrossEntropyLoss()
    params = list(model.parameters())
    batches = w.batches(steps)

    def run(pieces: int) -> float:
        start = time.thread_time()
        for x, y in batches:
            for xs, ys in zip(torch.tensor_split(x, pieces), torch.tensor_split(y, pieces)):
                torch.autograd.grad(loss_fn(model(xs), ys), params)
        return (time.thread_time() - start) / steps * 1e3

    run(1), run(2)
    whole, halves = [], []
    for _ in range(rounds):
        whole.append(run(1))
        halves.append(run(2))
    torch.set_num_threads(before)
    return (f"split floor (1 thread, forward+backward, thread CPU ms/step): global batch {_med(whole):.2f}, "
            f"two halves {_med(halves):.2f}: x{_med(halves) / _med(whole):.3f} "
            f"(per round {min(h / g for h, g in zip(halves, whole)):.3f}-{max(h / g for h, g in zip(halves, whole)):.3f})")


class _Clock:
    """Per (replica, name) seconds, from wrappers around multidev's functions and the step's phases."""

    def __init__(self) -> None:
        self.total: dict = collections.defaultdict(float)

    def wrap(self, owner: object, attr: str, name: str, clock=time.thread_time) -> None:
        original = getattr(owner, attr)

        def timed(*args, **kwargs):
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                self.total[(context.current_replica_id(), name)] += clock() - start

        setattr(owner, attr, timed)


def phases(w: workloads.Workload, names: list, steps: int, rounds: int) -> str:
    """Per-replica thread CPU of mirrored_2's phases and multidev's work in them, and the plain loop's."""
    from multidev.collectives.rendezvous import Rendezvous
    from multidev.distribute.backward_reduce import BackwardReducer
    from multidev.distribute.replica_update import SplitPlan

    clock = _Clock()
    clock.wrap(BackwardReducer, "_finish", "  reduce in backward (multidev)")
    clock.wrap(SplitPlan, "_copy_out", "  copies to the other replica (multidev)")
    clock.wrap(Rendezvous, "exchange", "meetings (wall, all)", time.perf_counter)
    strategy = md.distribute.MirroredStrategy(names[:2])
    torch.manual_seed(0)
    with strategy.scope():
        model = w.model()
        opt = w.optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")

    def replica_step(x, y, global_batch):
        r = context.current_replica_id()
        t0 = time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = md.nn.compute_average_loss(loss_fn(model(x), y), global_batch_size=global_batch)
        t1 = time.thread_time()
        loss.backward()
        t2 = time.thread_time()
        opt.step()
        t3 = time.thread_time()
        for name, seconds in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer step", t3 - t2)):
            clock.total[(r, name)] += seconds

    batches = w.batches(steps)
    parts = [(md.distribute.PerReplica(torch.tensor_split(x, 2)), md.distribute.PerReplica(torch.tensor_split(y, 2)),
              len(y)) for x, y in batches]
    for args in parts[:2]:
        strategy.run(replica_step, args=args)
    clock.total.clear()
    for _ in range(rounds):
        for args in parts:
            strategy.run(replica_step, args=args)
    count = steps * rounds
    lines = ["mirrored_2, thread CPU ms per step of each replica (the meetings: wall):"]
    order = ["forward", "backward", "  reduce in backward (multidev)", "optimizer step",
             "  copies to the other replica (multidev)", "meetings (wall, all)"]
    for name in order:
        lines.append(f"  {name:42s} " + "  ".join(f"replica {r}: {clock.total[(r, name)] / count * 1e3:7.2f}"
                                                   for r in range(2)))
    lines.append("plain loop, 1 thread, thread CPU ms per step: " + _plain_phases(w, batches, rounds))
    return "\n".join(lines)


def _plain_phases(w: workloads.Workload, batches: list, rounds: int) -> str:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = w.model()
    opt, loss_fn = w.optimizer(model.parameters()), torch.nn.CrossEntropyLoss()
    total = collections.Counter()
    for r in range(rounds + 1):
        for x, y in batches:
            t0 = time.thread_time()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            t1 = time.thread_time()
            loss.backward()
            t2 = time.thread_time()
            opt.step()
            t3 = time.thread_time()
            if r:   # the first round warms up
                total.update({"forward": t1 - t0, "backward": t2 - t1, "optimizer step": t3 - t2})
    torch.set_num_threads(before)
    count = len(batches) * rounds
    return ", ".join(f"{k} {v / count * 1e3:.2f}" for k, v in total.items())


def threads(w: workloads.Workload, names: list, device: torch.device, steps: int, rounds: int) -> str:
    """Wall and CPU per step: plain, and mirrored_2 with 1 and 2 intra-op threads per replica."""
    batches = w.batches(steps)
    built = {"plain": variants.build("plain", w, names, device)}
    for k in (1, 2):
        variant = variants.build("mirrored_2", w, names, device)
        variant.strategy.extended._runner._intra_op_threads = k   # what ReplicaRunner derives from torch's count
        built[f"mirrored_2, {k} thread(s) per replica"] = variant
    for variant in built.values():
        variant.run(batches[:2])
    walls, cpus = collections.defaultdict(list), collections.defaultdict(list)
    for r in range(rounds):
        for name in (list(built) if r % 2 == 0 else list(built)[::-1]):
            wall, cpu = built[name].run(batches)
            walls[name].append(wall)
            cpus[name].append(cpu)
    lines = [f"threads (process torch threads {torch.get_num_threads()}), ms/step, ratios per round to plain:"]
    for name in built:
        ratios = [a / b for a, b in zip(walls[name], walls["plain"])]
        lines.append(f"  {name:38s} wall {_med(walls[name]) * 1e3:8.2f} (ratio {_med(ratios):.3f}, "
                     f"{min(ratios):.3f}-{max(ratios):.3f})  CPU {_med(cpus[name]) * 1e3:8.2f} "
                     f"(ratio {_med(a / b for a, b in zip(cpus[name], cpus['plain'])):.3f})")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp", choices=sorted(workloads.WORKLOADS))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="split,phases,threads")
    args = parser.parse_args(argv)
    names, device = configure_devices(2, "cpu")
    w = workloads.get(args.workload)
    print(f"{args.workload}, torch {torch.__version__}, {os.cpu_count()} CPUs, load average before "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    wanted = args.only.split(",")
    if "split" in wanted:
        print(split_floor(w, args.steps, args.rounds), flush=True)
    if "phases" in wanted:
        print(phases(w, names, args.steps, args.rounds), flush=True)
    if "threads" in wanted:
        print(threads(w, names, device, args.steps, args.rounds), flush=True)
    print(f"load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
