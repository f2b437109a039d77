"""Run the programs of ``torchfunc_programs.py`` and write their results as JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/torchfunc_run.py OUT_DIR   # MirroredStrategy and one device
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/torchfunc_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/torchfunc_run.py OUT_DIR   # MultiWorkerMirroredStrategy

The ports are ``pyexamples2_run.py``'s, with what these programs need beyond them: the replica count, the
spread of a tensor outside any module, and the reduction of gradients set by hand (``p.grad = ...`` with no
backward: DDP's reducer never sees them, so its port all-reduces them by hand; multidev's optimizer step
sums them across replicas). The DDP run imports no multidev.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyexamples2_run import Ddp2, Mirrored2, _write  # noqa: E402
from pytutorials_run import _recorded  # noqa: E402
from torchfunc_programs import PROGRAMS  # noqa: E402
from process_exit import leave_process_group  # noqa: E402


class DdpFunc(Ddp2):
    def num_replicas(self) -> int:
        return self.world

    def reduce_hand_set_gradients(self, params) -> None:
        """``dist.all_reduce(p.grad)`` (a sum): what multidev's ``optimizer.step()`` does with them."""
        for p in params:
            torch.distributed.all_reduce(p.grad)

    def spread(self, flat: torch.Tensor) -> float:
        first = flat.detach().clone()
        torch.distributed.broadcast(first, src=0)
        spread = (flat.detach() - first).abs().max()
        torch.distributed.all_reduce(spread, op=torch.distributed.ReduceOp.MAX)
        return float(spread)


    def mean_tensor(self, t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        torch.distributed.all_reduce(t)
        return t / self.world


class DdpAsPrinted(DdpFunc):
    """The DDP port that leaves gradients set by hand alone (DDP reduces nothing it did not see in backward)."""

    def reduce_hand_set_gradients(self, params) -> None:
        pass


class MirroredFunc(Mirrored2):
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def reduce_hand_set_gradients(self, params) -> None:
        """Nothing: ``optimizer.step()`` sums gradients no backward reduced."""

    def mean_tensor(self, t: torch.Tensor) -> torch.Tensor:
        import multidev as md
        return md.distribute.get_replica_context().all_reduce("mean", t)

    def spread(self, flat: torch.Tensor) -> float:
        return 0.0   # (a tensor outside any module: one for the replicas of this process)


class OneDevice:
    """The program on one device: the whole global batch, no wrapper."""

    def scope(self):
        return contextlib.nullcontext()

    def wrap(self, model, **ddp_kwargs):
        return model

    def distribute(self, loader):
        return iter(loader)

    def run(self, fn, args=()):
        return fn(*args)

    def mean(self, value) -> float:
        return float(value)

    def replica_id(self) -> int:
        return 0

    def num_replicas(self) -> int:
        return 1

    def reduce_hand_set_gradients(self, params) -> None:
        pass

    def mean_tensor(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def weights(self, *models) -> dict:
        return {"params": torch.cat([p.detach().reshape(-1) for m in models for p in m.parameters()]).tolist(),
                "spread": 0.0}


# Compared with one device as well (their distributed result is one device's to reassociation).
ONE_DEVICE = ("dp_sgd_opacus", "hvp_in_update_reduced", "maml", "maml_first_order", "input_gradient_penalty",
              "jacobian_penalty", "hvp_curvature_penalty", "ensemble_module")
# Under ``multidev launch --workers 2`` (one replica a worker).
ON_WORKERS = ("maml", "dp_sgd", "dp_sgd_opacus", "ensemble_as_printed", "input_gradient_penalty",
              "jit_script_submodule", "hvp_in_update_reduced")


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = MirroredFunc(strategy)
    results = {name: _recorded(program, port) for name, program in PROGRAMS.items()}
    one = {name: _recorded(PROGRAMS[name], OneDevice()) for name in ONE_DEVICE}
    _write({"multidev": results, "one_device": one}, out_dir, "torchfunc_multidev.json")


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = MirroredFunc(strategy)
    results = {name: _recorded(PROGRAMS[name], port) for name in ON_WORKERS}
    _write(results, out_dir, f"torchfunc_worker{strategy.extended.worker_index}.json")


def main_ddp(out_dir: str) -> None:
    dist = torch.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = DdpFunc()
    results = {name: _recorded(program, port) for name, program in PROGRAMS.items()}
    results["dp_sgd_no_reduction"] = _recorded(PROGRAMS["dp_sgd"], DdpAsPrinted())
    if port.rank == 0:
        _write(results, out_dir, "torchfunc_ddp.json")
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
