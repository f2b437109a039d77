"""Run the programs of ``rl_programs.py`` / ``rl_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/rl_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/rl_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/rl_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``RL_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_exit import leave_process_group  # noqa: E402
from pyexamples2_run import Ddp2, Mirrored2  # noqa: E402
from pytutorials_run import _recorded  # noqa: E402
from rl_programs import RL  # noqa: E402
from rl_programs2 import RL2  # noqa: E402

ALL = {**RL, **RL2}
if os.environ.get("RL_ONLY"):
    ALL = {name: ALL[name] for name in os.environ["RL_ONLY"].split(",")}


class RlDdpPort(Ddp2):
    """A DDP rank; what a DDP port writes by hand for a tensor outside any module and for ``p.grad = ...``."""

    def free_variable(self, tensor):
        return tensor.requires_grad_()

    def sum_gradients(self, params) -> None:
        for p in params:
            torch.distributed.all_reduce(p.grad)


class RlMirroredPort(Mirrored2):
    """The multidev port: ``md.Variable`` for a free tensor; gradients set by hand are summed by
    ``optimizer.step()``."""

    def free_variable(self, tensor):
        import multidev as md
        return md.Variable(tensor)

    def sum_gradients(self, params) -> None:
        """Nothing to write: ``optimizer.step()`` sums gradients no backward reduced."""


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = RlMirroredPort(strategy)
    _write(out_dir, "rl_multidev.json", {name: _recorded(program, port) for name, program in ALL.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = RlMirroredPort(strategy)
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    _write(out_dir, f"rl_worker{strategy.extended.worker_index}.json", results)


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = RlDdpPort()
    results = {name: _recorded(program, port) for name, program in ALL.items()}
    if port.rank == 0:
        _write(out_dir, "rl_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
