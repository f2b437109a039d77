"""Run the PyTorch tutorials of ``pytutorials.py`` ... ``pytutorials4.py`` and write their results as JSON
into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/pytutorials_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/pytutorials_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/pytutorials_run.py OUT_DIR   # MultiWorkerMirroredStrategy

Each tutorial is one function ``tutorial(port) -> dict`` typed as printed, with what a port changes
behind ``port``: ``DdpPort`` wraps the trained models in ``DistributedDataParallel`` and feeds each rank
its half of every global batch; ``MirroredPort`` builds in ``strategy.scope()``, runs the loop body in
``strategy.run`` and reads its data through ``strategy.experimental_distribute_dataset``. The DDP run
imports no multidev.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytutorials import TUTORIALS  # noqa: E402
from pytutorials2 import TUTORIALS2  # noqa: E402
from pytutorials3 import TUTORIALS3  # noqa: E402
from pytutorials4 import TUTORIALS4  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

ALL = {**TUTORIALS, **TUTORIALS2, **TUTORIALS3, **TUTORIALS4}


class DdpPort:
    """A DDP rank: models wrapped, each global batch cut to this rank's half, the step called directly."""

    def __init__(self):
        self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()

    def scope(self):
        return contextlib.nullcontext()

    def wrap(self, model, **ddp_kwargs):
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, **ddp_kwargs)

    def module(self, model):
        return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model

    def distribute(self, loader):
        for batch in loader:
            yield tuple(torch.tensor_split(t, self.world)[self.rank] for t in batch)

    def run(self, fn, args=()):
        return fn(*args)

    def sum(self, value) -> float:
        """A per-rank number summed over the ranks (the tutorials' counts, as an ``all_reduce``)."""
        t = torch.as_tensor(value, dtype=torch.float64).clone()
        torch.distributed.all_reduce(t)
        return float(t)

    def mean(self, value) -> float:
        return self.sum(value) / self.world

    def weights(self, *models) -> dict:
        flat = torch.cat([p.detach().double().reshape(-1) for m in models for p in self.module(m).parameters()])
        first = flat.clone()
        torch.distributed.broadcast(first, src=0)
        spread = (flat - first).abs().max()
        torch.distributed.all_reduce(spread, op=torch.distributed.ReduceOp.MAX)
        return {"params": flat.tolist(), "spread": float(spread)}


class MirroredPort:
    """The multidev port: ``strategy.scope()``, ``strategy.run``, ``experimental_distribute_dataset``."""

    def __init__(self, strategy):
        self.strategy = strategy

    def scope(self):
        return self.strategy.scope()

    def wrap(self, model, **ddp_kwargs):
        return model

    def module(self, model):
        return model

    def distribute(self, loader):
        return self.strategy.experimental_distribute_dataset(loader)

    def run(self, fn, args=()):
        return self.strategy.run(fn, args=args)

    def sum(self, value) -> float:
        return float(self.strategy.reduce("SUM", value, axis=None))

    def mean(self, value) -> float:
        return float(self.strategy.reduce("MEAN", value, axis=None))

    def weights(self, *models) -> dict:
        local = self.strategy.experimental_local_results   # TensorFlow's view of every replica's copy
        copies = [local(p) for m in models for p in m.parameters()]
        spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
        return {"params": torch.cat([c[0].detach().double().reshape(-1) for c in copies]).tolist(), "spread": spread}


def _recorded(tutorial, port) -> dict:
    """The tutorial's result, or the error it raised (the test says whether one was expected)."""
    try:
        return tutorial(port)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        traceback.print_exc()   # in the process's log, which the test shows on failure
        return {"error": f"{type(e).__name__}: {e}"}


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    port = MirroredPort(strategy)
    results = {name: _recorded(tutorial, port) for name, tutorial in ALL.items()}
    with open(os.path.join(out_dir, "pytutorials_multidev.json"), "w") as f:
        json.dump(results, f)


# Under ``multidev launch --workers 2`` (MultiWorkerMirroredStrategy, one replica per worker): the tutorials
# that train as DDP with MirroredStrategy, Neural Transfer (each worker's own image), and last FGSM as printed
# (its workers' collectives part ways: nothing may run after it).
ON_WORKERS = ("transfer_finetune", "transfer_fixed_feature_extractor", "cifar10_classifier", "spatial_transformer",
              "fgsm_autograd_grad", "dqn", "dqn_update_in_run", "transformer_lm", "legendre_module",
              "polynomial_sequential", "mnist_logistic", "seq2seq_translation", "neural_style", "fgsm")


def main_workers(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    port = MirroredPort(strategy)
    results = {name: _recorded(ALL[name], port) for name in ON_WORKERS}
    with open(os.path.join(out_dir, f"pytutorials_worker{strategy.extended.worker_index}.json"), "w") as f:
        json.dump(results, f)


def main_ddp(out_dir: str) -> None:
    dist = torch.distributed
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    port = DdpPort()
    results = {name: _recorded(tutorial, port) for name, tutorial in ALL.items()}
    if port.rank == 0:
        with open(os.path.join(out_dir, "pytutorials_ddp.json"), "w") as f:
            json.dump(results, f)
    leave_process_group()


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
