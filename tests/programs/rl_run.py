"""Run the programs of ``rl_programs.py`` / ``rl_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/rl_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/rl_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/rl_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``RL_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyexamples2_run import Ddp2, Mirrored2  # noqa: E402
from rl_programs import RL  # noqa: E402
from rl_programs2 import RL2  # noqa: E402
from three_ways_main import only, run_main  # noqa: E402

ALL = {**RL, **RL2}
ALL = only(ALL, "RL_ONLY")


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


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("rl", ALL, RlMirroredPort, RlDdpPort)
