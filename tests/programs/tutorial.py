"""PyTorch's "DDP tutorial series" (pytorch/examples distributed/ddp-tutorial-series: multigpu.py,
multigpu_torchrun.py, multinode.py) as it is written: a ``Trainer`` class over a DataLoader with
``shuffle=False, sampler=DistributedSampler(dataset)``, ``sampler.set_epoch(epoch)`` every epoch,
``LOCAL_RANK`` read from the environment, a snapshot of ``model.module.state_dict()`` saved by
rank 0 only. Float64, 20 examples, 4 per process per batch (each rank's last batch holds 2), two
epochs: the second epoch's order differs from the first only through ``set_epoch``.

One change from the tutorial: its loss, ``F.cross_entropy`` of a ``Linear(20, 1)`` output, is 0
whatever the weights (a softmax over one class), so nothing would train; ``F.mse_loss`` here.
``one_device`` trains the same model on each step's union of the ranks' batches (rank 0's rows
first): the global batch DDP averages over. This module imports only torch.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

F64 = torch.float64
SIZE, BATCH_SIZE, EPOCHS, WORLD = 20, 4, 2, 2


class MyTrainDataset(Dataset):   # the tutorial's datautils.py
    def __init__(self, size):
        g = torch.Generator().manual_seed(70)
        self.size = size
        self.data = [(torch.rand(20, generator=g, dtype=F64), torch.rand(1, generator=g, dtype=F64)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def load_train_objs():
    train_set = MyTrainDataset(SIZE)
    torch.manual_seed(71)
    model = torch.nn.Linear(20, 1).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.125)   # exact in float32 (Keras keeps it so)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int, sampler=None):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, shuffle=False,
                      sampler=sampler if sampler is not None else DistributedSampler(dataset))


class Trainer:
    """multigpu_torchrun.py's Trainer (a snapshot path, ``LOCAL_RANK`` from the environment)."""

    def __init__(self, model, train_data, optimizer, save_every, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.epochs_run = 0
        self.model = self.wrap(model)

    def wrap(self, model):
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model)   # device_ids=[self.gpu_id] on GPUs

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        torch.save(snapshot, self.snapshot_path)

    def is_chief(self):
        return self.gpu_id == 0

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.is_chief() and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def snapshot_params(path: str) -> list:
    """The saved snapshot's weights (``weights_only``: tensors and plain values, no code)."""
    state = torch.load(path, weights_only=True)["MODEL_STATE"]
    return [state[k].reshape(-1).tolist() for k in ("weight", "bias")]


def params_of(model) -> list:
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


def one_device(world: int = WORLD, set_epoch: bool = True) -> list:
    """The global batches ``world`` DDP ranks train on (each step: rank 0's batch, then rank 1's...),
    on one model; without ``set_epoch`` every epoch repeats the first one's order."""
    dataset, model, optimizer = load_train_objs()
    loaders = [prepare_dataloader(dataset, BATCH_SIZE, DistributedSampler(dataset, num_replicas=world, rank=r))
               for r in range(world)]
    for epoch in range(EPOCHS):
        for loader in loaders:
            loader.sampler.set_epoch(epoch if set_epoch else 0)
        _train_on(model, optimizer, [[torch.cat(column) for column in zip(*parts)] for parts in zip(*loaders)])
    return params_of(model)


def in_order(global_batch: int) -> list:
    """The dataset's examples in order, in global batches (the last one partial)."""
    xs, ys = (torch.stack(column) for column in zip(*MyTrainDataset(SIZE).data))
    return [(xs[i:i + global_batch], ys[i:i + global_batch]) for i in range(0, SIZE, global_batch)]


def one_device_in_order(global_batch: int) -> list:
    """The model trained on ``in_order(global_batch)`` for every epoch."""
    _, model, optimizer = load_train_objs()
    for _ in range(EPOCHS):
        _train_on(model, optimizer, in_order(global_batch))
    return params_of(model)


def _train_on(model, optimizer, batches) -> None:
    for source, targets in batches:
        optimizer.zero_grad()
        F.mse_loss(model(source), targets).backward()
        optimizer.step()


def ddp(out_dir: str) -> dict:
    """The tutorial's main() after init_process_group: rank 0 saves the snapshot after epoch 0 and 1."""
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, BATCH_SIZE)
    path = os.path.join(out_dir, "snapshot_ddp.pt")
    trainer = Trainer(model, train_data, optimizer, save_every=1, snapshot_path=path)
    trainer.train(EPOCHS)
    return {"params": params_of(model), "snapshot": snapshot_params(path) if trainer.is_chief() else None}
