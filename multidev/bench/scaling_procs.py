"""Worker of ``multidev bench scaling``: the probe (``scaling_model``) with one process per replica,
under torch DDP (Gloo) or ``MultiWorkerMirroredStrategy`` (one replica per worker, as
``multidev launch`` starts it), each rank training on its part of every global batch.

Started by ``child.run_workers``; rank 0 prints the RESULT line.
"""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist

from multidev.bench import measure, scaling_model


def _ddp(device: torch.device):
    net = scaling_model.model().to(device)
    net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
    return scaling_model.train_step(net, scaling_model.optimizer(net.parameters()))


def _mwms(device: torch.device):
    import multidev as md

    strategy = md.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        net = scaling_model.model()
        opt = scaling_model.optimizer(net.parameters())
    step = scaling_model.train_step(net, opt)
    return lambda x, y: strategy.run(step, args=(x, y))


METHODS = {"ddp": _ddp, "mwms": _mwms}


def main(spec: dict) -> dict:
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    device = torch.device("cuda:0" if spec["device"] == "gpu" else "cpu")  # every rank on the one GPU
    step = METHODS[spec["method"]](device)
    global_batches = scaling_model.batches(spec["steps"] + spec["warmup"], scaling_model.PER_REPLICA_BATCH * world, device)
    mine = [(torch.tensor_split(x, world)[rank], torch.tensor_split(y, world)[rank]) for x, y in global_batches]
    measure.time_steps(step, mine[: spec["warmup"]])
    samples = []
    for _ in range(spec["rounds"]):
        dist.barrier()
        samples.append(measure.time_steps(step, mine[spec["warmup"]:], device)[0])
    dist.barrier()
    dist.destroy_process_group()
    return {"machine": measure.machine(), "step_s": measure.summarize(samples)}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit_and_leave

    emit_and_leave(main(json.loads(sys.argv[1])), int(os.environ["RANK"]))
