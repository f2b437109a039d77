"""Run the programs of ``loader_programs.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/loader_run.py OUT_DIR   # MirroredStrategy
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/loader_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/loader_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``LOADER_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_programs import LOADER_PROGRAMS  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

ALL = dict(LOADER_PROGRAMS)
if os.environ.get("LOADER_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["LOADER_ONLY"].split(",")}


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    mirrored = md.distribute.MirroredStrategy()
    assert mirrored.num_replicas_in_sync == 2
    results = {name: _recorded(program, MirroredPort(mirrored)) for name, program in ALL.items()}
    _write(out_dir, "loader_multidev.json", results)


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    results = {name: _recorded(program, MirroredPort(strategy)) for name, program in ALL.items()}
    _write(out_dir, f"loader_worker{strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    dist = torch.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = DdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "loader_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
