"""Run the programs of ``graph_programs.py`` / ``graph_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/graph_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/graph_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/graph_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``GRAPH_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev. The
programs "as printed" that a strategy refuses run on the strategies only (under DDP they need a sampler).
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_programs import GRAPHS, GRAPHS_STRATEGY_ONLY  # noqa: E402
from graph_programs2 import RECOMMENDERS, RECOMMENDERS_STRATEGY_ONLY  # noqa: E402
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402

ALL = {**GRAPHS, **RECOMMENDERS}
STRATEGY_ONLY = {**GRAPHS_STRATEGY_ONLY, **RECOMMENDERS_STRATEGY_ONLY}
if os.environ.get("GRAPH_ONLY"):
    only = os.environ["GRAPH_ONLY"].split(",")
    ALL = {name: f for name, f in ALL.items() if name in only}
    STRATEGY_ONLY = {name: f for name, f in STRATEGY_ONLY.items() if name in only}


class GraphDdpPort(DdpPort):
    """A DDP rank; ``per_rank(loader_fn)`` is the loader of this rank's examples (a ``DistributedSampler``)."""

    def per_rank(self, loader_fn):
        return loader_fn(self.world, self.rank)


class GraphMirroredPort(MirroredPort):
    """The port of a per-rank loader: ``distribute_datasets_from_function`` with one pipeline per replica."""

    def per_rank(self, loader_fn):
        import multidev as md
        options = md.distribute.InputOptions(
            experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
        return self.strategy.distribute_datasets_from_function(
            lambda ctx: loader_fn(ctx.num_input_pipelines, ctx.input_pipeline_id), options)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def _strategy_results(port) -> dict:
    return {name: _recorded(program, port) for name, program in {**ALL, **STRATEGY_ONLY}.items()}


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    _write(out_dir, "graph_multidev.json", _strategy_results(GraphMirroredPort(strategy)))


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    _write(out_dir, f"graph_worker{strategy.extended.worker_index}.json", _strategy_results(GraphMirroredPort(strategy)))


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = GraphDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "graph_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
