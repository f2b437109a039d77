"""Run the programs of ``resume_programs.py`` and write their results as JSON into the directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/resume_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/resume_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/resume_run.py OUT_DIR   # MultiWorkerMirroredStrategy

Each way saves and loads its checkpoints in its own directory under OUT_DIR (the programs' relative paths).
The DDP job first writes a pretrained DDP checkpoint (``ddp_pretrained.pth.tar``, ``module.`` keys, and
``ddp_module.pth``); the other ways wait for it and fine-tune from it. The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time

import torch
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_exit import leave_process_group  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort, _recorded  # noqa: E402
from resume_programs import RESUME, ddp_pretrain  # noqa: E402

PRETRAINED, MODULE_FILE = "ddp_pretrained.pth.tar", "ddp_module.pth"


class ResumeDdpPort(DdpPort):
    """A DDP rank: its own ``DistributedSampler`` slice of each epoch, rank 0 saves, ``dist.barrier()``."""

    def __init__(self, out_dir: str):
        super().__init__()
        self.out_dir, self.is_chief = out_dir, self.rank == 0

    def sampler(self, dataset, seed: int):
        return DistributedSampler(dataset, shuffle=True, seed=seed)

    def loader_batch(self, global_batch: int) -> int:
        return global_batch // self.world

    def sharded(self, loader):
        return loader

    def barrier(self) -> None:
        torch.distributed.barrier()

    def other(self):
        return self

    def ddp_checkpoints(self) -> tuple:
        return os.path.join(self.out_dir, PRETRAINED), os.path.join(self.out_dir, MODULE_FILE)


class ResumeMirroredPort(MirroredPort):
    """The port: ``DistributedSampler`` of the job's layout (one slice per worker), the chief saves, the
    workers meet after a save (a collective) before anyone reads it."""

    def __init__(self, strategy, out_dir: str):
        super().__init__(strategy)
        self.out_dir = out_dir
        self.is_chief = getattr(strategy.extended, "worker_index", 0) == 0

    def _workers(self) -> tuple:
        return getattr(self.strategy.extended, "num_workers", 1), getattr(self.strategy.extended, "worker_index", 0)

    def sampler(self, dataset, seed: int):
        num_workers, worker_index = self._workers()
        return DistributedSampler(dataset, num_replicas=num_workers, rank=worker_index, shuffle=True, seed=seed)

    def loader_batch(self, global_batch: int) -> int:
        return global_batch // self._workers()[0]

    def sharded(self, loader):
        return self.strategy.experimental_distribute_dataset(loader)

    def barrier(self) -> None:
        self.sum(self.strategy.run(lambda: torch.ones((), dtype=torch.float64)))

    def other(self):
        """The resume on one device (OneDeviceStrategy) when this port has 2 local replicas."""
        import multidev as md
        if self.strategy.num_replicas_in_sync == 1 or self._workers()[0] > 1:
            return self
        return ResumeMirroredPort(md.distribute.OneDeviceStrategy("/cpu:0"), self.out_dir)

    def ddp_checkpoints(self) -> tuple:
        paths = (os.path.join(self.out_dir, PRETRAINED), os.path.join(self.out_dir, MODULE_FILE))
        deadline = time.monotonic() + 120
        while not all(os.path.exists(p) for p in paths):   # written (renamed into place) by the DDP job
            if time.monotonic() > deadline:
                raise TimeoutError(f"the DDP job wrote no {paths}")
            time.sleep(0.2)
        return paths


def _in_own_directory(out_dir: str, way: str) -> None:
    os.makedirs(os.path.join(out_dir, way), exist_ok=True)
    os.chdir(os.path.join(out_dir, way))


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = ResumeMirroredPort(strategy, out_dir)
    _in_own_directory(out_dir, "multidev")
    _write(out_dir, "resume_multidev.json", {name: _recorded(program, port) for name, program in RESUME.items()})


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = ResumeMirroredPort(strategy, out_dir)
    _in_own_directory(out_dir, "workers")
    results = {name: _recorded(program, port) for name, program in RESUME.items()}
    _write(out_dir, f"resume_worker{strategy.extended.worker_index}.json", results)


def _save_pretrained(out_dir: str, rank: int) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = ddp_pretrain(DDP)
    if rank == 0:
        for name, state in ((PRETRAINED, {'state_dict': model.state_dict()}), (MODULE_FILE, model.module.state_dict())):
            torch.save(state, os.path.join(out_dir, name + ".part"))
            os.replace(os.path.join(out_dir, name + ".part"), os.path.join(out_dir, name))
    torch.distributed.barrier()


def main_ddp(out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = ResumeDdpPort(out_dir)
    _save_pretrained(out_dir, port.rank)
    _in_own_directory(out_dir, "ddp")
    results = {name: _recorded(program, port) for name, program in RESUME.items()}
    if port.rank == 0:
        _write(out_dir, "resume_ddp.json", results)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
