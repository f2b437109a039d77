"""Run the programs of ``generative_programs.py`` / ``generative_programs2.py`` and write their results as JSON
into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/generative_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/generative_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/generative_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``GENERATIVE_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generative_programs import GENERATIVE  # noqa: E402
from generative_programs2 import GENERATIVE2  # noqa: E402
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402

ALL = {**GENERATIVE, **GENERATIVE2}
if os.environ.get("GENERATIVE_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["GENERATIVE_ONLY"].split(",")}


class GenDdpPort(DdpPort):
    """A DDP rank, plus the buffers (rank 0's, and how far the ranks' are apart) and the sum of a tensor over
    the ranks in place (``dist.all_reduce``)."""

    def buffers(self, *models) -> dict:
        bufs = [b.detach().double().reshape(-1) for m in models for b in self.module(m).buffers()]
        flat = torch.cat(bufs) if bufs else torch.zeros(0, dtype=torch.float64)
        first = flat.clone()
        torch.distributed.broadcast(first, src=0)
        spread = (flat - first).abs().max() if len(flat) else torch.zeros((), dtype=torch.float64)
        torch.distributed.all_reduce(spread, op=torch.distributed.ReduceOp.MAX)
        return {"buffers": first.tolist(), "buffer_spread": float(spread)}

    def all_reduce_(self, tensor):
        torch.distributed.all_reduce(tensor)
        return tensor

    def rank0_(self, tensor):   # DDP's broadcast_buffers hands rank 0's buffers to the next forward
        return tensor


class GenMirroredPort(MirroredPort):
    """The multidev port; ``all_reduce_`` is the line a port writes for ``dist.all_reduce(t)`` in the step."""

    def buffers(self, *models) -> dict:
        local = self.strategy.experimental_local_results
        copies = [local(b) for m in models for b in m.buffers()]
        spread = max((float((c[r].double() - c[0].double()).abs().max()) for c in copies for r in range(len(c))),
                     default=0.0)
        flat = [c[0].detach().double().reshape(-1) for c in copies]
        return {"buffers": torch.cat(flat).tolist() if flat else [], "buffer_spread": spread}

    def all_reduce_(self, tensor):
        import multidev as md
        return tensor.copy_(md.distribute.get_replica_context().all_reduce("sum", tensor))

    def rank0_(self, tensor):
        import multidev as md
        return tensor.copy_(md.distribute.get_replica_context().all_gather(tensor[None], axis=0)[0])


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = GenMirroredPort(strategy)
    _write(out_dir, "generative_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = GenMirroredPort(strategy)
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if strategy.extended.worker_index == 0:   # a run on the chief alone (logging a sample) waits for nobody
        local = strategy.experimental_local_results
        results["chief_only_run"] = _recorded(lambda port: {"value": float(local(port.run(_chief_sample))[0])}, port)
    _write(out_dir, f"generative_worker{strategy.extended.worker_index}.json", results)


def _chief_sample():
    return torch.ones((), dtype=torch.float64) * 2


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = GenDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "generative_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
