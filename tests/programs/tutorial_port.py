"""The DDP tutorial's Trainer (``tutorial.py``) ported to multidev as its users would port it: the
model and optimizer built in ``strategy.scope()``, no ``DDP(...)`` wrapper (so ``model.module``
becomes ``model``), the same DataLoader and ``DistributedSampler`` given the job's workers
(``num_replicas=strategy.extended.num_workers, rank=strategy.extended.worker_index``: the
tutorial's default reads torch.distributed's process group, which multidev does not start) and
handed to ``strategy.experimental_distribute_dataset``, the unchanged ``_run_batch`` in
``strategy.run``, ``set_epoch`` as before, the snapshot saved by worker 0.

``run_cases(strategy, out_dir, tag)`` records the port and its mistaken variant (one sampler slice
per replica instead of per worker) for ``run_multidev.py`` and ``run_mwms.py``.
"""

from __future__ import annotations

import os

import torch
from torch.utils.data.distributed import DistributedSampler

from tutorial import BATCH_SIZE, EPOCHS, Trainer, load_train_objs, prepare_dataloader, snapshot_params


class PortedTrainer(Trainer):
    def __init__(self, strategy, model, train_data, optimizer, save_every, snapshot_path):
        self.strategy = strategy
        self.gpu_id = strategy.extended.worker_index   # was int(os.environ["LOCAL_RANK"])
        self.model, self.train_data, self.optimizer = model, train_data, optimizer
        self.save_every, self.snapshot_path, self.epochs_run = save_every, snapshot_path, 0
        self.dist_data = strategy.experimental_distribute_dataset(train_data)

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.dist_data:
            self.strategy.run(self._run_batch, args=(source, targets))

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.state_dict(), "EPOCHS_RUN": epoch}   # was self.model.module
        torch.save(snapshot, self.snapshot_path)


def _train(strategy, out_dir: str, name: str, replicas_per_sampler: bool) -> dict:
    ext = strategy.extended
    with strategy.scope():
        dataset, model, optimizer = load_train_objs()
    shards = strategy.num_replicas_in_sync if replicas_per_sampler else ext.num_workers
    sampler = DistributedSampler(dataset, num_replicas=shards, rank=ext.worker_index)
    path = os.path.join(out_dir, f"snapshot_{name}_{ext.num_local_replicas}x{ext.num_workers}_w{ext.worker_index}.pt")
    trainer = PortedTrainer(strategy, model, prepare_dataloader(dataset, BATCH_SIZE, sampler), optimizer,
                            save_every=1, snapshot_path=path)
    trainer.train(EPOCHS)
    copies = [p.values if hasattr(p, "values") else (p,) for p in model.parameters()]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    saved = snapshot_params(path) if ext.worker_index == 0 else None
    return {"params": [c[0].detach().reshape(-1).tolist() for c in copies], "replica_spread": spread,
            "snapshot": saved, "saved_here": os.path.exists(path)}


def run_cases(strategy, out_dir: str, recorded) -> dict:
    """Each case's result through ``recorded(fn, *args)`` (which records an exception instead)."""
    return {"ddp_tutorial": recorded(_train, strategy, out_dir, "tutorial", False),
            "ddp_tutorial_sampler_per_replica": recorded(_train, strategy, out_dir, "per_replica", True)}
