"""Where multidev's per-replica Python goes in the scaling probe (issue 28 item 4): CPU time per step,
measured by switching one cost off at a time in the same process, in alternating blocks.

cProfile cannot give these figures with replica threads: a thread waiting for the GIL is charged to
whatever function it is in, so the profile ranks (``python -m multidev.bench.scaling_profile``) but
does not measure. Here each line is the CPU time (``time.process_time``: every thread; a shared
machine's other processes barely move it) of blocks of steps with the cost and without it, median:

* ``rng mode``: the per-replica random-stream TorchFunctionMode (``placement/replica_random.py``) on
  vs off (off is not a valid configuration for models that draw: it only measures the mode);
* ``internals moded (before)``: multidev's own tensor attribute reads and writes in a step
  (``DistributedVariable.grad``, the split update's ``reduce``/``publish`` with ``_mark_synced``) run under
  the mode as they did before 2026-11-28 (now with torch function handling off: a negative cost is the gain);
* ``empty run``: ``strategy.run`` of a function that does nothing (the hand-off to the replica threads);
* ``plain threads``: the same model and steps in N plain Python threads with no multidev and no
  gradient reduction (the floor the GIL sets).

    OMP_NUM_THREADS=1 python benchmarks/replica_python_cost.py [--steps 50] [--blocks 12] [--replicas 2 4]
"""

from __future__ import annotations

import argparse
import functools
import queue
import statistics
import threading
import time

import torch

from multidev.bench import scaling_model
from multidev.bench.scaling_profile import build
from multidev.bench.train_inprocess import configure_devices


def _cpu_us(fn, count: int) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) / count * 1e6


def _alternate(variants: dict, blocks: int, count: int) -> dict:
    """Per variant (``{name: (switch_on, run_block)}``, run in alternating order) the median and the
    minimum CPU us per step over ``blocks`` blocks (under load the minimum is the steadier of the two:
    contention only adds)."""
    samples = {k: [] for k in variants}
    names = list(variants)
    for b in range(blocks):
        for name in (names if b % 2 == 0 else names[::-1]):
            switch, block = variants[name]
            switch()
            samples[name].append(_cpu_us(block, count))
    return {k: (statistics.median(v), min(v)) for k, v in samples.items()}


def _moded_internals():
    """(restore, patch): switch multidev's attribute-heavy internals between as-is (torch function handling off:
    ``DistributedVariable.grad``, the split update's ``reduce``/``publish``) and as they were before, under the mode."""
    from multidev.distribute import replica_update
    from multidev.values import context, cross_replica_grads, variables

    def grad_get(self):   # DistributedVariable.grad before: the copy's .grad read under the replica's mode
        replica_id = context.current_replica_id()
        if replica_id is None:
            cross_replica_grads.fold(self)
        return self._components[0 if replica_id is None else replica_id].grad

    def grad_set(self, value):
        replica_id = context.current_replica_id()
        if replica_id is None:
            return as_is[2].fset(self, value)
        self._components[replica_id].grad = value

    plan, var = replica_update.SplitPlan, variables.DistributedVariable
    as_is = (plan.__dict__["reduce"], plan.__dict__["publish"], var.grad)
    before = (as_is[0].__wrapped__, as_is[1].__wrapped__, property(grad_get, grad_set))

    def use(which):
        plan.reduce, plan.publish, var.grad = which

    return (lambda: use(as_is)), (lambda: use(before))


def _plain_threads(n: int, steps: int, blocks: int) -> float:
    """Median CPU us per step of N plain threads each training its own copy (one hand-off per step)."""
    steps_fns = []
    for _ in range(n):
        net = scaling_model.model()
        steps_fns.append(scaling_model.train_step(net, scaling_model.optimizer(net.parameters())))
    data = scaling_model.batches(steps, scaling_model.PER_REPLICA_BATCH)
    inboxes, done = [queue.SimpleQueue() for _ in range(n)], queue.SimpleQueue()

    def worker(r):
        while (task := inboxes[r].get()) is not None:
            task()
            done.put(r)

    threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()

    def block():
        for x, y in data:
            for r in range(n):
                inboxes[r].put(functools.partial(steps_fns[r], x, y))
            for _ in range(n):
                done.get()

    block()
    out = statistics.median(_cpu_us(block, steps) for _ in range(blocks))
    for inbox in inboxes:
        inbox.put(None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--replicas", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    torch.set_num_threads(1)
    names, _ = configure_devices(max(args.replicas + [2]), "cpu")
    restore, patch = _moded_internals()
    for n in [1] + args.replicas:
        strategy, one = build(n, names)
        data = scaling_model.batches(args.steps, scaling_model.PER_REPLICA_BATCH * n)

        def steps():
            for x, y in data:
                one(x, y)

        steps()
        streams = strategy.extended._runner._random_streams   # a measurement switches internals off
        mode_for = streams.mode_for
        with_mode = lambda: (restore(), setattr(streams, "mode_for", mode_for))  # noqa: E731
        variants = {"as is": (with_mode, steps)}
        if n > 1:
            variants["no rng mode"] = (lambda: (restore(), setattr(streams, "mode_for", lambda r: None)), steps)
            variants["internals moded (before)"] = (lambda: (patch(), setattr(streams, "mode_for", mode_for)), steps)
        res = _alternate(variants, args.blocks, args.steps)
        with_mode()
        empty = statistics.median(_cpu_us(lambda: [strategy.run(lambda: None) for _ in range(200)], 200)
                                  for _ in range(args.blocks))
        base, base_min = res["as is"]
        line = [f"N={n}: step {base:.0f} us CPU (min {base_min:.0f})"]
        for k, (v, v_min) in res.items():
            if k != "as is":
                line.append(f"{k} {v:.0f} (min {v_min:.0f}; cost {base - v:.0f} us = {(base - v) / base:.0%}, "
                            f"by the minima {base_min - v_min:.0f} us = {(base_min - v_min) / base_min:.0%})")
        line.append(f"empty run {empty:.0f} us ({empty / base:.1%})")
        line.append(f"plain threads {_plain_threads(n, args.steps, args.blocks):.0f} us")
        print("; ".join(line), flush=True)


if __name__ == "__main__":
    main()
