"""Run the programs of ``timeseries_programs*.py`` and write their results as JSON
into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/timeseries_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/timeseries_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/timeseries_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``TIMESERIES_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from timeseries_programs import TIMESERIES  # noqa: E402
from timeseries_programs2 import TIMESERIES2  # noqa: E402
from timeseries_programs3 import TIMESERIES3  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort  # noqa: E402

ALL = {**TIMESERIES, **TIMESERIES2, **TIMESERIES3}
ALL = only(ALL, "TIMESERIES_ONLY")


class SeriesDdpPort(DdpPort):
    @property
    def loader_shares(self) -> int:
        """A DDP program's loader holds one rank's batch: the global batch over the ranks."""
        return self.world


class SeriesMirroredPort(MirroredPort):
    loader_shares = 1   # ported with two lines, the loader's batch is the global batch


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("timeseries", ALL, SeriesMirroredPort, SeriesDdpPort)
