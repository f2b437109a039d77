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

from tutorial import BATCH_SIZE, EPOCHS, Trainer, in_order, load_train_objs, prepare_dataloader, snapshot_params


GLOBAL_BATCH = 8


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
            "ddp_tutorial_sampler_per_replica": recorded(_train, strategy, out_dir, "per_replica", True),
            "ddp_tutorial_keras_fit": recorded(_keras_fit, strategy, out_dir),
            "keras_fit_distributed_dataset": recorded(_keras_fit, strategy, out_dir, True)}


def _keras_fit(strategy, out_dir: str, distributed_dataset: bool = False) -> dict:
    """The same loader in Keras's ``fit`` (``set_epoch`` from a callback), on the tutorial's Linear and
    SGD(0.125) with a mean squared error: the same updates as the Trainer's. ``distributed_dataset``:
    instead, ``fit(strategy.experimental_distribute_dataset(...))`` of the examples in order, in global
    batches of 8 (each worker's slice of each)."""
    import multidev as md
    ext = strategy.extended
    with strategy.scope():
        dataset, module, _ = load_train_objs()
        md.keras.mixed_precision.set_global_policy("float64")   # the tutorial's float64, for its wrapper
        try:
            model = md.keras.Model.from_torch(module)
        finally:
            md.keras.mixed_precision.set_global_policy("float32")
        model.compile(optimizer=md.keras.optimizers.SGD(learning_rate=0.125), loss="mse")
    loader = prepare_dataloader(dataset, BATCH_SIZE, DistributedSampler(dataset, num_replicas=ext.num_workers,
                                                                        rank=ext.worker_index))
    set_epoch = md.keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: loader.sampler.set_epoch(epoch))
    if distributed_dataset:
        xs, ys = (torch.cat(column) for column in zip(*in_order(GLOBAL_BATCH)))
        data = md.data.Dataset.from_tensor_slices((xs, ys)).batch(GLOBAL_BATCH)
        model.fit(strategy.experimental_distribute_dataset(data), epochs=EPOCHS, verbose=0)
    else:
        model.fit(loader, epochs=EPOCHS, callbacks=[set_epoch], verbose=0)
    copies = [p.values if hasattr(p, "values") else (p,) for p in module.parameters()]
    return {"params": [c[0].detach().reshape(-1).tolist() for c in copies],
            "replica_spread": max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))}
