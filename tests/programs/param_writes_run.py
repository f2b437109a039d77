"""Run the programs of ``param_writes.py`` / ``param_writes2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/param_writes_run.py OUT_DIR   # Mirrored + CentralStorage
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/param_writes_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/param_writes_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``PARAM_WRITES_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from param_writes import PARAM_WRITES  # noqa: E402
from param_writes2 import PARAM_WRITES2  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

ALL = {**PARAM_WRITES, **PARAM_WRITES2}
if os.environ.get("PARAM_WRITES_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["PARAM_WRITES_ONLY"].split(",")}


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    mirrored = md.distribute.MirroredStrategy()
    central = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    assert mirrored.num_replicas_in_sync == central.num_replicas_in_sync == 2
    results = {}
    for name, program in ALL.items():
        results[name] = {"mirrored": _recorded(program, MirroredPort(mirrored)),
                         "central": _recorded(program, MirroredPort(central))}
    _write(out_dir, "param_writes_multidev.json", results)


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    results = {name: _recorded(program, MirroredPort(strategy)) for name, program in ALL.items()}
    _write(out_dir, f"param_writes_worker{strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    dist = torch.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = DdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "param_writes_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
