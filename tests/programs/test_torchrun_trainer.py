"""The DDP tutorial series' multigpu_torchrun.py, ported (``torchrun_trainer.py``), under ``multidev launch
--workers 2``: the program reads torchrun's ``LOCAL_RANK``, ``RANK`` and ``WORLD_SIZE`` (which the
launcher now sets, as torchrun does), saves its snapshot from the chief only, resumes from it with the
tutorial's ``_load_snapshot`` (training the snapshot's epoch again, as the tutorial does), and ends with
DDP's weights: one device on each step's union of the ranks' sampler batches (DDP's equality with that
reference is ``test_programs.py``'s ``test_ddp_tutorial_port_equals_ddp``). Its own process group
(``init_process_group`` on the launcher's MASTER_ADDR/MASTER_PORT) all-reduces imagenet's validation
meter outside ``strategy.run``: the loss over the whole set, on every worker; inside it (one replica
per process) the distributed tutorial's ``average_gradients`` leaves the averaged gradients as they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from multidev.cli.launch import torchrun_variables
from tests.conftest import ROOT
from tests.programs import tutorial

HERE = os.path.dirname(os.path.abspath(__file__))


def one_device(epochs: list[int], world: int = 2) -> list:
    """The model trained on DDP's global batches of each epoch in ``epochs`` (a resumed run repeats one)."""
    dataset, model, optimizer = tutorial.load_train_objs()
    loaders = [tutorial.prepare_dataloader(dataset, tutorial.BATCH_SIZE, DistributedSampler(dataset, num_replicas=world, rank=r))
               for r in range(world)]
    for epoch in epochs:
        for loader in loaders:
            loader.sampler.set_epoch(epoch)
        tutorial._train_on(model, optimizer, [[torch.cat(column) for column in zip(*parts)] for parts in zip(*loaders)])
    return tutorial.params_of(model)


def _difference(a: list, b: list) -> float:
    assert [len(p) for p in a] == [len(p) for p in b]
    return max(abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q))


@pytest.mark.timeout(240)
def test_torchrun_trainer_resumes_from_its_snapshot_under_multidev_launch(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for name in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2",
                           os.path.join(HERE, "torchrun_trainer.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=200, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[worker 1] Resuming training from snapshot at Epoch 1" in proc.stdout
    workers = [json.loads((tmp_path / f"torchrun_w{r}.json").read_text()) for r in range(2)]
    for rank, got in enumerate(workers):
        assert (got["RANK"], got["LOCAL_RANK"], got["WORLD_SIZE"], got["LOCAL_WORLD_SIZE"]) == (str(rank), str(rank), "2", "2")
        assert got["worker_index"] == rank and got["epochs"] == [[0, 1], [1, 2]]
        assert got["replica_spread"] == 0.0 and got["params"] == workers[0]["params"]
        assert got["averaged_twice"] is True, "average_gradients by hand changed the averaged gradients"
    assert workers[0]["snapshot"] == workers[0]["params"] and workers[1]["snapshot"] is None
    want = one_device([0, 1, 1, 2])
    assert _difference(workers[0]["params"], want) <= 1e-12
    dataset, model, _ = tutorial.load_train_objs()
    with torch.no_grad():
        for p, values in zip(model.parameters(), want):
            p.copy_(torch.tensor(values, dtype=p.dtype).reshape(p.shape))
        xs, ys = (torch.stack(column) for column in zip(*dataset.data))
        val_loss = float(torch.nn.functional.mse_loss(model(xs), ys))
    assert workers[0]["val_loss"] == workers[1]["val_loss"] == pytest.approx(val_loss, rel=1e-6)   # float32 sums
    assert _difference(workers[0]["params"], one_device([0, 1, 2])) > 1e-6, "the resumed epoch counts"


def test_torchrun_variables_rank_the_chief_first_and_no_parameter_server():
    compute = [("chief", 0), ("worker", 0), ("worker", 1)]
    assert torchrun_variables(compute, "chief", 0, 29500) == {
        "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500"}
    assert torchrun_variables(compute, "worker", 1, 29500)["RANK"] == "2"
    assert torchrun_variables(compute, "ps", 0, 29500) == {}
