"""Run the pytorch/examples programs of ``pyexamples2.py``, ``pyexamples2_more.py`` and
``pyexamples2_trainer.py`` and write their
results as JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/pyexamples2_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/pyexamples2_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/pyexamples2_run.py OUT_DIR   # MultiWorkerMirroredStrategy

The ports are ``pytutorials_run.py``'s, with what these examples need beyond them: the replica's (rank's)
index for the programs that keep Python state per replica, and, for DDP only, the gradient average a DDP
port of forward-forward must write by hand (its layers train through ``Layer.train``, which a
``DistributedDataParallel`` wrapper would shadow with ``Module.train``). The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from pyexamples2 import EXAMPLES  # noqa: E402
from pyexamples2_more import EXAMPLES_MORE  # noqa: E402
from pyexamples2_trainer import EXAMPLES_TRAINER  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

ALL = {**EXAMPLES, **EXAMPLES_MORE, **EXAMPLES_TRAINER}


class Ddp2(DdpPort):
    def replica_id(self) -> int:
        return self.rank

    def average_gradients(self, params) -> None:
        """What DDP's reducer does after ``backward``: every rank's gradient averaged."""
        for p in params:
            torch.distributed.all_reduce(p.grad)
            p.grad /= self.world

    def ranks_sum(self, value: float) -> float:
        """A number each rank keeps for itself, summed over the ranks."""
        return self.sum(value)

    def buffers(self, model) -> list:
        """The mean of the ranks' buffers (timm's ``distribute_bn(reduce=True)``): what multidev reads."""
        out = []
        for b in model.buffers():
            t = b.detach().double().clone()
            torch.distributed.all_reduce(t)
            out += (t / self.world).reshape(-1).tolist()
        return out


class Mirrored2(MirroredPort):
    def replica_id(self) -> int:
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)

    def average_gradients(self, params) -> None:
        """Nothing to do: ``loss.backward()`` in ``strategy.run`` already averaged them."""

    def ranks_sum(self, value: float) -> float:
        """A number the step's replicas added into (one per process, as each rank's), summed over workers."""
        collective = self.strategy.extended.worker_collective
        return float(collective.sum(torch.tensor([value], dtype=torch.float64)))

    def buffers(self, model) -> list:
        return [x for b in model.buffers() for x in b.detach().double().reshape(-1).tolist()]


def _write(results: dict, out_dir: str, name: str) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = Mirrored2(strategy)
    _write({name: _recorded(example, port) for name, example in ALL.items()}, out_dir, "pyexamples2_multidev.json")


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = Mirrored2(strategy)
    results = {name: _recorded(ALL[name], port) for name in ON_WORKERS}
    _write(results, out_dir, f"pyexamples2_worker{strategy.extended.worker_index}.json")


def main_ddp(out_dir: str) -> None:
    dist = torch.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = Ddp2()
    results = {name: _recorded(example, port) for name, example in ALL.items()}
    if port.rank == 0:
        _write(results, out_dir, "pyexamples2_ddp.json")
    leave_process_group()


# Under ``multidev launch --workers 2`` (one replica per worker): the RL examples as printed (each worker's
# lists are its own, as each rank's) and a few that train.
ON_WORKERS = ("reinforce", "actor_critic", "vae", "super_resolution", "siamese", "forward_forward", "gcn",
              "time_sequence_prediction", "regression", "cifar_trainer", "cifar_trainer_item_in_step")

if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
