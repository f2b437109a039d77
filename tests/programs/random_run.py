"""Run the programs of ``random_programs.py`` / ``random_programs2.py`` and write their results as JSON into
the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/random_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/random_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/random_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``RANDOM_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort  # noqa: E402
from random_programs import RANDOM  # noqa: E402
from random_programs2 import RANDOM2  # noqa: E402

ALL = {**RANDOM, **RANDOM2}
ALL = only(ALL, "RANDOM_ONLY")


class RandomDdpPort(DdpPort):
    def replica_id(self) -> int:
        return torch.distributed.get_rank()


class RandomMirroredPort(MirroredPort):
    def replica_id(self) -> int:   # the port's line for ``dist.get_rank()`` in the step
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)   # (an int32 tensor, as TF)


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("random", ALL, RandomMirroredPort, RandomDdpPort)
