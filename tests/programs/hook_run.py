"""Run the programs of ``hook_programs.py`` / ``hook_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/hook_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/hook_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/hook_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``HOOKS_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hook_programs import HOOKS  # noqa: E402
from hook_programs2 import HOOKS2  # noqa: E402
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402

ALL = {**HOOKS, **HOOKS2}
if os.environ.get("HOOKS_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["HOOKS_ONLY"].split(",")}


class HookDdpPort(DdpPort):
    def replica_id(self) -> int:
        return self.rank


class HookMirroredPort(MirroredPort):
    """``replica_id()`` is the line a port writes to key a hook's dict by replica."""

    def replica_id(self) -> int:
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = HookMirroredPort(strategy)
    _write(out_dir, "hook_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = HookMirroredPort(strategy)
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    _write(out_dir, f"hook_worker{strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = HookDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "hook_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
