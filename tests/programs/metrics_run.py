"""Run the metric programs of ``metrics_programs.py`` and write what rank 0 (replica 0's script) prints as
JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/metrics_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/metrics_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/metrics_run.py OUT_DIR   # MultiWorkerMirroredStrategy

The ports are ``pytutorials_run.py``'s, with what these programs need beyond them. The DDP run imports no
multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from metrics_programs import PROGRAMS  # noqa: E402
from process_exit import leave_process_group  # noqa: E402


class Ddp(DdpPort):
    def local0(self, value):
        """Rank 0's own value (what it prints)."""
        return value

    def count(self, value) -> float:
        """The rank's own count, as its script adds it up."""
        return float(value)

    def epoch_sum(self, value: float) -> float:
        """What the script all-reduces before printing the epoch's global numbers."""
        return self.sum(value)

    def meter_all_reduce(self, meter) -> None:
        meter.all_reduce()

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(t) for _ in range(self.world)]
        torch.distributed.all_gather(parts, t)
        return torch.cat(parts)

    local_rows = gather


class Mirrored(MirroredPort):
    def local0(self, value):
        return self.strategy.experimental_local_results(value)[0]

    def count(self, value) -> float:
        return float(self.strategy.reduce("SUM", value, axis=None))

    def epoch_sum(self, value: float) -> float:
        return value   # already every replica's

    def meter_all_reduce(self, meter) -> None:
        """Nothing: the replicas updated the one meter (every replica's batches)."""

    def gather(self, t) -> torch.Tensor:
        return self.strategy.gather(t, axis=0)

    def local_rows(self, t) -> torch.Tensor:
        return torch.cat(self.strategy.experimental_local_results(t))


def _run(port, names, out_dir: str, file_name: str | None) -> None:
    """Run the programs ``names`` on ``port``; write what they return (or raised) to ``file_name``."""
    results = {name: _recorded(PROGRAMS[name], port) for name in names}
    if file_name is not None:
        with open(os.path.join(out_dir, file_name), "w") as f:
            json.dump(results, f)


# Under ``multidev launch --workers 2`` (MultiWorkerMirroredStrategy, one replica a worker, no process group):
# torchmetrics syncs over the job's workers; ``nonlocal`` counts are each worker's own, as each rank's.
ON_WORKERS = tuple(n for n in PROGRAMS if n.startswith("torchmetrics_")) + ("nonlocal_counts", "reduced_counts",
                                                                           "sklearn_f1")


def main(out_dir: str) -> None:
    """A worker of ``multidev launch`` (TF_CONFIG), a DDP rank (RANK), or one process of 2 replicas."""
    if "TF_CONFIG" in os.environ:
        import multidev as md
        strategy = md.distribute.MultiWorkerMirroredStrategy()
        _run(Mirrored(strategy), ON_WORKERS, out_dir, f"metrics_worker{strategy.extended.worker_index}.json")
    elif "RANK" in os.environ:
        torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        port = Ddp()
        _run(port, PROGRAMS, out_dir, "metrics_ddp.json" if port.rank == 0 else None)
        leave_process_group()
    else:
        import multidev as md
        strategy = md.distribute.MirroredStrategy()
        assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
        _run(Mirrored(strategy), PROGRAMS, out_dir, "metrics_multidev.json")


if __name__ == "__main__":
    main(sys.argv[1])
