"""Run the programs of ``sequence_programs.py`` ... ``sequence_programs3.py`` and write their results as JSON
into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/sequence_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/sequence_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/sequence_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``SEQUENCE_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from sequence_programs import SEQUENCE_PROGRAMS  # noqa: E402
from sequence_programs2 import SEQUENCE_PROGRAMS2  # noqa: E402
from sequence_programs3 import SEQUENCE_PROGRAMS3  # noqa: E402

ALL = {**SEQUENCE_PROGRAMS, **SEQUENCE_PROGRAMS2, **SEQUENCE_PROGRAMS3}
if os.environ.get("SEQUENCE_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["SEQUENCE_ONLY"].split(",")}
AS_PRINTED = ("translation_as_printed", "char_rnn_as_printed")   # refused by multidev; DDP reads them otherwise


class SequenceDdpPort(DdpPort):
    def per_replica(self, dataset):
        """The DDP program's loader: one example a step for each rank, its own."""
        return DataLoader(dataset, batch_size=1, sampler=DistributedSampler(dataset, shuffle=False))


class SequenceMirroredPort(MirroredPort):
    def per_replica(self, dataset):
        """The same loader, each input pipeline its share, each replica its own batch of one."""
        def dataset_fn(ctx):
            return DataLoader(dataset, batch_size=1, sampler=DistributedSampler(
                dataset, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id, shuffle=False))
        return self.strategy.distribute_datasets_from_function(dataset_fn)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    port = SequenceMirroredPort(md.distribute.MirroredStrategy())
    assert port.strategy.num_replicas_in_sync == 2
    _write(out_dir, "sequence_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    port = SequenceMirroredPort(md.distribute.MultiWorkerMirroredStrategy())
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    _write(out_dir, f"sequence_worker{port.strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = SequenceDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items() if name not in AS_PRINTED}
    if port.rank == 0:
        _write(out_dir, "sequence_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
