"""Run every program of ``programs.py`` under torch DDP: this process is one of 2 Gloo ranks on
loopback (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment) and trains on its half of
each global batch; rank 0 writes ``ddp.json`` into the directory given as argument. No multidev.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from programs import GLOBAL_BATCH, PROGRAMS, parameters_of  # noqa: E402


def run(program, rank: int, world: int) -> dict:
    state = program.build()
    for name in program.models:
        state[name] = DDP(state[name])
    carry = program.initial_carry(GLOBAL_BATCH // world)
    losses = []
    for batch in program.batches():
        mine = tuple(torch.tensor_split(t, world)[rank] for t in batch)
        loss, carry = program.step(state, mine, carry)
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(float(total) / world)
    return {"losses": losses, "params": [p.detach().double().reshape(-1).tolist() for p in parameters_of(program, state)]}


def main(out_dir: str) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {program.name: run(program, rank, world) for program in PROGRAMS}
    if rank == 0:
        with open(os.path.join(out_dir, "ddp.json"), "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
