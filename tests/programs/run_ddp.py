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
from programs import GLOBAL_BATCH, parameters_of  # noqa: E402
from idioms import ALL_PROGRAMS  # noqa: E402
import tutorial  # noqa: E402
from process_exit import leave_process_group  # noqa: E402


def run(program, rank: int, world: int) -> dict:
    state = program.build()
    for name in program.models:
        state[name] = DDP(state[name], **program.ddp_kwargs)
    carry = program.initial_carry(GLOBAL_BATCH // world)
    losses, observed = [], []
    for i, batch in enumerate(program.batches()):
        mine = tuple(torch.tensor_split(t, world)[rank] for t in batch)
        loss, carry = program.step(state, mine, carry)
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(float(total) / world)
        if program.after_step is not None:
            program.after_step(state, i)
        if program.observe is not None:
            observed.append(program.observe(state))
    params = [p.detach().double().reshape(-1) for p in parameters_of(program, state)]
    return {"losses": losses, "observed": observed, "rank_spread": _rank_spread(params),
            "params": [p.tolist() for p in params]}


def _rank_spread(params: list) -> float:
    """How far the other rank's parameters are from rank 0's (0.0 when DDP kept the ranks in step)."""
    flat = torch.cat(params)
    first = flat.clone()
    dist.broadcast(first, src=0)
    spread = (flat - first).abs().max()
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    return float(spread)


def _recorded(program, rank: int, world: int) -> dict:
    """The program's result, or the error it raised on this rank (every rank raises alike: the
    programs are symmetric)."""
    try:
        return run(program, rank, world)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        return {"error": f"{type(e).__name__}: {e}"}


def main(out_dir: str) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {program.name: _recorded(program, rank, world) for program in ALL_PROGRAMS}
    results["tutorial"] = tutorial.ddp(out_dir)   # the DDP tutorial's Trainer (LOCAL_RANK, a DistributedSampler)
    if rank == 0:
        with open(os.path.join(out_dir, "ddp.json"), "w") as f:
            json.dump(results, f)
    leave_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
