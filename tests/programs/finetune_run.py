"""Run the programs of ``finetune_programs.py`` / ``finetune_programs2.py`` and write their results as JSON into
the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/finetune_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/finetune_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/finetune_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``FINETUNE_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from finetune_programs import FINETUNE  # noqa: E402
from finetune_programs2 import FINETUNE2  # noqa: E402
from generative_run import GenDdpPort, GenMirroredPort  # noqa: E402

ALL = {**FINETUNE, **FINETUNE2}
ALL = only(ALL, "FINETUNE_ONLY")


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("finetune", ALL, GenMirroredPort, GenDdpPort)
