"""Run the programs of ``random_programs.py`` / ``random_programs2.py`` and write their results as JSON into
the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/random_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/random_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/random_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``RANDOM_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from random_programs import RANDOM  # noqa: E402
from random_programs2 import RANDOM2  # noqa: E402

ALL = {**RANDOM, **RANDOM2}
if os.environ.get("RANDOM_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["RANDOM_ONLY"].split(",")}


class RandomDdpPort(DdpPort):
    def replica_id(self) -> int:
        return torch.distributed.get_rank()


class RandomMirroredPort(MirroredPort):
    def replica_id(self) -> int:   # the port's line for ``dist.get_rank()`` in the step
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)   # (an int32 tensor, as TF)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = RandomMirroredPort(strategy)
    _write(out_dir, "random_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = RandomMirroredPort(strategy)
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    _write(out_dir, f"random_worker{strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = RandomDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "random_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
