"""Run the programs of ``hook_programs.py`` / ``hook_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/hook_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/hook_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/hook_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``HOOKS_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from hook_programs import HOOKS  # noqa: E402
from hook_programs2 import HOOKS2  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort  # noqa: E402

ALL = {**HOOKS, **HOOKS2}
ALL = only(ALL, "HOOKS_ONLY")


class HookDdpPort(DdpPort):
    def replica_id(self) -> int:
        return self.rank


class HookMirroredPort(MirroredPort):
    """``replica_id()`` is the line a port writes to key a hook's dict by replica."""

    def replica_id(self) -> int:
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("hook", ALL, HookMirroredPort, HookDdpPort)
