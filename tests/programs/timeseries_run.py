"""Run the programs of ``timeseries_programs*.py`` and write their results as JSON
into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/timeseries_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/timeseries_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/timeseries_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``TIMESERIES_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timeseries_programs import TIMESERIES  # noqa: E402
from timeseries_programs2 import TIMESERIES2  # noqa: E402
from timeseries_programs3 import TIMESERIES3  # noqa: E402
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402

ALL = {**TIMESERIES, **TIMESERIES2, **TIMESERIES3}
if os.environ.get("TIMESERIES_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["TIMESERIES_ONLY"].split(",")}


class SeriesDdpPort(DdpPort):
    @property
    def loader_shares(self) -> int:
        """A DDP program's loader holds one rank's batch: the global batch over the ranks."""
        return self.world


class SeriesMirroredPort(MirroredPort):
    loader_shares = 1   # ported with two lines, the loader's batch is the global batch


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    port = SeriesMirroredPort(md.distribute.MirroredStrategy())
    assert port.strategy.num_replicas_in_sync == 2
    _write(out_dir, "timeseries_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    port = SeriesMirroredPort(md.distribute.MultiWorkerMirroredStrategy())
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    _write(out_dir, f"timeseries_worker{port.strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = SeriesDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "timeseries_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
