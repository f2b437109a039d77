"""Run the programs of ``optim_state_programs.py`` and write their results as JSON into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/optim_state_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/optim_state_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/optim_state_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``OPTIM_STATE_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from optim_state_programs import OPTIM_STATE  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort  # noqa: E402

ALL = only(OPTIM_STATE, "OPTIM_STATE_ONLY")

if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("optim_state", ALL, MirroredPort, DdpPort)
