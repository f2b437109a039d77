"""The DDP tutorial series' multigpu_torchrun.py (``tutorial.py``'s Trainer) ported to multidev and
started by ``multidev launch``, as its users run it under ``torchrun``: ``LOCAL_RANK``, ``RANK`` and
``WORLD_SIZE`` read from the environment (the sampler's layout, the chief's ``gpu_id == 0``), a snapshot
of ``model.state_dict()`` (was ``model.module``) saved every epoch and loaded at start when it exists
(``_load_snapshot``: the run resumes at the snapshot's ``EPOCHS_RUN``, which the tutorial trains again).

    multidev launch --workers 2 tests/programs/torchrun_trainer.py OUT_DIR

The job trains 2 epochs, then stands for its restart (torchrun's ``--max-restarts``) in the same
processes: a new model and optimizer, a new Trainer that finds the snapshot and trains to 3 epochs.
The program keeps the tutorial's ``ddp_setup()`` (``init_process_group``, Gloo on CPUs) for what it
reduces outside ``strategy.run``: imagenet's ``validate`` on each worker's ``DistributedSampler`` share,
its ``AverageMeter`` all-reduced across the processes. Each worker writes ``torchrun_w<RANK>.json``
into OUT_DIR: the variables it read, the epochs each Trainer ran, replica 0's weights, (the chief) the
snapshot's, and the validation loss.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multidev as md  # noqa: E402
from pyexamples import AverageMeter  # noqa: E402
from pyexamples_idioms import average_gradients  # noqa: E402
from tutorial import BATCH_SIZE, load_train_objs, params_of, prepare_dataloader, snapshot_params  # noqa: E402
from tutorial_port import PortedTrainer  # noqa: E402


class ResumingTrainer(PortedTrainer):
    """multigpu_torchrun.py's Trainer: ``gpu_id`` from LOCAL_RANK, ``_load_snapshot`` when the file exists."""

    def __init__(self, strategy, model, train_data, optimizer, save_every, snapshot_path):
        super().__init__(strategy, model, train_data, optimizer, save_every, snapshot_path)
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.epochs = []
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, weights_only=True)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_epoch(self, epoch):
        self.epochs.append(epoch)
        super()._run_epoch(epoch)


def _train(strategy, path: str, max_epochs: int):
    """The tutorial's main(save_every=1, total_epochs=max_epochs), its objects built in the scope."""
    with strategy.scope():
        dataset, model, optimizer = load_train_objs()
    sampler = DistributedSampler(dataset, num_replicas=int(os.environ["WORLD_SIZE"]), rank=int(os.environ["RANK"]))
    trainer = ResumingTrainer(strategy, model, prepare_dataloader(dataset, BATCH_SIZE, sampler), optimizer,
                              save_every=1, snapshot_path=path)
    trainer.train(max_epochs)
    return trainer, model


def validate(model, dataset) -> float:
    """imagenet's validate(): this worker's share of the set, the meter all-reduced (its ``args.distributed``)."""
    sampler = DistributedSampler(dataset, shuffle=False, drop_last=True)   # the program's own process group
    losses = AverageMeter("Loss")
    model.eval()
    with torch.no_grad():
        for source, targets in prepare_dataloader(dataset, BATCH_SIZE, sampler):
            losses.update(F.mse_loss(model(source), targets).item(), source.size(0))
    losses.all_reduce()
    model.train()
    return losses.avg


def averaged_twice(model, source, targets) -> bool:
    """The distributed tutorial's ``average_gradients`` after ``loss.backward()`` in the step: with the
    program's own process group and one replica per process torch.distributed passes through, and the
    hand-made average of gradients already averaged leaves them as they are (DDP's numbers)."""
    model.zero_grad()
    F.mse_loss(model(source), targets).backward()
    before = [p.grad.clone() for p in model.parameters()]
    average_gradients(model)
    return all(torch.equal(b, p.grad) for b, p in zip(before, model.parameters()))


def main(out_dir: str) -> None:
    dist.init_process_group(backend="gloo")   # the tutorial's ddp_setup() (nccl on GPUs), kept
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    path = os.path.join(out_dir, "snapshot.pt")
    first, _ = _train(strategy, path, 2)
    strategy.reduce("SUM", strategy.run(lambda: torch.ones(())), axis=None)   # the job ends: the chief has saved
    trainer, model = _train(strategy, path, 3)
    copies = [p.values for p in model.parameters()]
    result = {name: os.environ[name] for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    result.update(epochs=[first.epochs, trainer.epochs], worker_index=strategy.extended.worker_index,
                  params=params_of(model),
                  replica_spread=max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c))),
                  snapshot=snapshot_params(path) if trainer.is_chief() else None,   # the chief saves
                  val_loss=validate(model, trainer.train_data.dataset),
                  averaged_twice=bool(strategy.run(averaged_twice, args=(model, *next(iter(trainer.dist_data))))))
    with open(os.path.join(out_dir, f"torchrun_w{os.environ['RANK']}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
