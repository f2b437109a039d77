"""Worker process of the two-process training benchmark: DistributedDataParallel (Gloo) and
MultiWorkerMirroredStrategy on the same processes, workload and global batches, timed in
alternating rounds (each worker trains on its half of every global batch).

Started by ``child.run_workers`` (TF_CONFIG for multidev, MASTER_ADDR/PORT, RANK, WORLD_SIZE for
torch.distributed); rank 0 prints the RESULT line.
"""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist

from multidev.bench import measure
from multidev.bench.workloads import Workload, get as get_workload


def _local_part(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return torch.tensor_split(t, world)[rank]


def ddp_runner(workload: Workload, rank: int, world: int):
    """The baseline: torch.nn.parallel.DistributedDataParallel over the default Gloo group."""
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(workload.model())
    opt = workload.optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(_local_part(x, rank, world)), _local_part(y, rank, world))
        loss.backward()
        opt.step()

    return lambda batches: measure.time_steps(step, batches)


def mwms_runner(workload: Workload, strategy, rank: int, world: int):
    """The same training under md.distribute.MultiWorkerMirroredStrategy (one replica per worker)."""
    import multidev as md

    torch.manual_seed(0)
    with strategy.scope():
        model = workload.model()
        opt = workload.optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")

    def replica_step(x, y, global_batch):
        opt.zero_grad(set_to_none=True)
        md.nn.compute_average_loss(loss_fn(model(x), y), global_batch_size=global_batch).backward()
        opt.step()

    def step(x, y):
        strategy.run(replica_step, args=(_local_part(x, rank, world), _local_part(y, rank, world), len(y)))

    return lambda batches: measure.time_steps(step, batches)


def main(spec: dict) -> dict:
    import multidev as md

    torch.set_num_threads(spec.get("threads", 1))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    results = {}
    for name in spec["workloads"]:
        workload = get_workload(name)
        batches = workload.batches(spec["steps"])
        runners = {}
        if "ddp_2proc" in spec["variants"]:
            runners["ddp_2proc"] = ddp_runner(workload, rank, world)
        if "mwms_2proc" in spec["variants"]:
            runners["mwms_2proc"] = mwms_runner(workload, strategy, rank, world)
        for run in runners.values():
            run(batches[: max(1, spec["warmup"])])
        times = {k: [] for k in runners}
        cpu = {k: [] for k in runners}
        peaks: dict[str, float] = {}
        for r in range(spec["rounds"]):
            for key in measure.rotated(list(runners), r):
                dist.barrier()
                measure.reset_peak()
                wall, cpu_s = runners[key](batches)
                times[key].append(wall)
                cpu[key].append(cpu_s)
                peaks[key] = max(peaks.get(key, 0.0), measure.peak_rss_mb() or 0.0)
        results[name] = {k: {"step_s": measure.summarize(v), "cpu_s": measure.summarize(cpu[k]), "peak_mb": peaks.get(k), "batch_size": workload.batch_size}
                         for k, v in times.items()}
    dist.barrier()
    dist.destroy_process_group()
    return {"machine": measure.machine(), "results": results}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit_and_leave

    emit_and_leave(main(json.loads(sys.argv[1])), int(os.environ["RANK"]))
