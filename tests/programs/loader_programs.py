"""Input pipelines as DDP programs write them, each ``case(port) -> dict`` over ``pytutorials_run``'s ports (a
DDP rank, or a strategy's port), ported as ``docs/ddp_port.md`` ("Input pipelines") says:

* a length-bucketing ``batch_sampler=`` (variable batch sizes and lengths, padded per batch in ``collate_fn``),
  split per rank inside it (DDP) / per input pipeline (``distribute_datasets_from_function``), or not split;
* an ``IterableDataset`` sharding by ``get_worker_info()`` and by rank (``torch.distributed`` when initialized,
  or WebDataset's ``RANK`` / ``WORLD_SIZE`` environment);
* PyTorch's reproducibility recipe (``num_workers=2, persistent_workers=True, worker_init_fn=seed_worker,
  generator=g``) with random augmentation (torch, numpy, random) in ``__getitem__``;
* ``WeightedRandomSampler`` / ``SubsetRandomSampler`` loaders without a DistributedSampler, and
  ``DistributedSampler(shuffle=True, seed=s, drop_last=True)`` with ``set_epoch``.

Float64, data made here; each step records the sum and count of the example ids trained (over the job). This
module imports only torch and numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

import os
import random

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import (DataLoader, Dataset, DistributedSampler, IterableDataset, Sampler,
                              SubsetRandomSampler, WeightedRandomSampler, get_worker_info)

F64 = torch.float64
N, VOCAB, WIDTH, CLASSES, EPOCHS = 26, 9, 4, 3, 2


def _ddp(port) -> bool:
    return hasattr(port, "rank")


def _pipelines(port, dataset_fn):
    """DDP: this rank's loader; the port: ``distribute_datasets_from_function`` with one pipeline per replica."""
    if _ddp(port):
        from types import SimpleNamespace
        return dataset_fn(SimpleNamespace(num_input_pipelines=port.world, input_pipeline_id=port.rank))
    import multidev as md
    options = md.distribute.InputOptions(experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
    return port.strategy.distribute_datasets_from_function(dataset_fn, options)


def _global(port, loader):
    """DDP: every rank reads the loader whole; the port: ``experimental_distribute_dataset`` splits each batch."""
    return loader if _ddp(port) else port.strategy.experimental_distribute_dataset(loader)


# ----------------------------------------------------------------------------- sequences, padded per batch
class Sequences(Dataset):
    def __init__(self, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.lengths = [1 + (i * 5) % 7 for i in range(N)]
        self.tokens = [torch.randint(1, VOCAB, (n,), generator=g) for n in self.lengths]
        self.labels = torch.randint(0, CLASSES, (N,), generator=g)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i], i


def pad_collate(items):
    tokens, labels, ids = zip(*items)
    return (pad_sequence(tokens, batch_first=True), torch.tensor([len(t) for t in tokens]), torch.stack(labels),
            torch.tensor(ids))


class BucketBatchSampler(Sampler):
    """Batches of similar lengths (buckets of 8 in a shuffled order, cut into batches of at most 3), the batch
    order shuffled; with ``num_replicas`` > 1 each rank takes every num_replicas-th batch (an equal count)."""

    def __init__(self, lengths, batch_size=3, num_replicas=1, rank=0, seed=0):
        self.lengths, self.batch_size, self.num_replicas, self.rank, self.seed = lengths, batch_size, num_replicas, rank, seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _batches(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        batches = []
        for start in range(0, len(order), 8):
            bucket = sorted(order[start:start + 8], key=lambda i: self.lengths[i])
            batches += [bucket[i:i + self.batch_size] for i in range(0, len(bucket), self.batch_size)]
        batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        per_rank = len(batches) // self.num_replicas
        return batches[self.rank::self.num_replicas][:per_rank]

    def __iter__(self):
        return iter(self._batches())

    def __len__(self):
        return len(self._batches())


class BagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(VOCAB, WIDTH, padding_idx=0), nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens, lengths):
        return self.head(self.emb(tokens).sum(1) / lengths.unsqueeze(1).to(F64))


def _built(port, make, seed=0):
    torch.manual_seed(seed)
    with port.scope():
        model = make().double()
        opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return port.wrap(model), opt


def _seq_step(model, opt):
    def step(tokens, lengths, labels, ids):
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens, lengths), labels)
        loss.backward()
        opt.step()
        return loss.detach(), ids.sum().to(F64), torch.tensor(float(len(ids)), dtype=F64)
    return step


def _epochs(port, model, opt, step, distributed, before_epoch=lambda e: None) -> dict:
    log, seen = [], []
    for epoch in range(EPOCHS):
        before_epoch(epoch)
        for batch in distributed:
            loss, ids, count = port.run(step, args=tuple(batch))
            log.append(port.mean(loss))
            seen.append([port.sum(ids), port.sum(count)])
    return {**port.weights(model), "log": log, "seen": seen}


def bucket_sampler_per_rank(port) -> dict:
    data, samplers = Sequences(), []

    def loader(ctx):
        samplers.append(BucketBatchSampler(data.lengths, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id))
        return DataLoader(data, batch_sampler=samplers[-1], collate_fn=pad_collate)
    model, opt = _built(port, BagModel)
    distributed = _pipelines(port, loader)
    return _epochs(port, model, opt, _seq_step(model, opt), distributed,
                   lambda e: [s.set_epoch(e) for s in samplers])


def bucket_sampler_unsplit(port) -> dict:
    """Every DDP rank reads the same bucketed batches (batch sizes 3, 2, 1: the last cannot feed 2 replicas)."""
    data = Sequences()
    sampler = BucketBatchSampler(data.lengths)
    model, opt = _built(port, BagModel)
    return _epochs(port, model, opt, _seq_step(model, opt),
                   _global(port, DataLoader(data, batch_sampler=sampler, collate_fn=pad_collate)), sampler.set_epoch)


# ----------------------------------------------------------------------------- iterable, sharded by rank
def _features(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, WIDTH, generator=g, dtype=F64), torch.randint(0, CLASSES, (N,), generator=g)


class ShardedStream(IterableDataset):
    """Shards by loader worker and by rank: ``torch.distributed`` when initialized (``by="dist"``), or the
    ``RANK`` / ``WORLD_SIZE`` environment as WebDataset's ``split_by_node`` reads it (``by="env"``)."""

    def __init__(self, by="dist", rank=None, world=None):
        self.x, self.y = _features()
        self.by, self.rank, self.world = by, rank, world

    def _node(self):
        if self.rank is not None:
            return self.rank, self.world
        if self.by == "env":
            return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        dist = torch.distributed
        return (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() else (0, 1)

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world = self._node()
        for i in range(N - N % (world * 4))[rank * workers + worker::world * workers]:
            yield self.x[i], self.y[i], i


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        return self.fc(x)


def _xy_step(model, opt):
    def step(x, y, ids):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach(), ids.sum().to(F64), torch.tensor(float(len(ids)), dtype=F64)
    return step


def _stream_case(port, by: str) -> dict:
    """DDP: each rank's loader of its shard, batch 2; the port reads the loader as DDP's rank does."""
    model, opt = _built(port, Linear)
    loader = DataLoader(ShardedStream(by), batch_size=2, num_workers=2)
    distributed = loader if _ddp(port) else port.strategy.experimental_distribute_dataset(loader)
    return _epochs(port, model, opt, _xy_step(model, opt), distributed)


def iterable_split_by_dist(port) -> dict:
    return _stream_case(port, "dist")


def iterable_split_by_env(port) -> dict:
    return _stream_case(port, "env")


def iterable_per_pipeline(port) -> dict:
    """The port of either: each input pipeline its shard (``ctx``), as each rank."""
    model, opt = _built(port, Linear)
    distributed = _pipelines(port, lambda ctx: DataLoader(
        ShardedStream(rank=ctx.input_pipeline_id, world=ctx.num_input_pipelines), batch_size=2, num_workers=2))
    return _epochs(port, model, opt, _xy_step(model, opt), distributed)


# ----------------------------------------------------------------------------- PyTorch's reproducibility recipe
class Augmented(Dataset):
    def __init__(self):
        self.x, self.y = _features(2)

    def __len__(self):
        return N

    def __getitem__(self, i):
        noise = 0.1 * torch.rand(WIDTH, dtype=F64) + 0.1 * float(np.random.rand()) + 0.1 * random.random()
        return self.x[i] + noise, self.y[i], i


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def reproducible_workers(port) -> dict:
    data, samplers = Augmented(), []
    g = torch.Generator()
    g.manual_seed(0)

    def loader(ctx):
        samplers.append(DistributedSampler(data, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id,
                                           shuffle=True, seed=3))
        return DataLoader(data, batch_size=3, sampler=samplers[-1], num_workers=2, persistent_workers=True,
                          worker_init_fn=seed_worker, generator=g)
    model, opt = _built(port, Linear)
    return _epochs(port, model, opt, _xy_step(model, opt), _pipelines(port, loader),
                   lambda e: [s.set_epoch(e) for s in samplers])


# ----------------------------------------------------------------------------- samplers
def _sampled(port, sampler, batch_size=4) -> dict:
    x, y = _features(3)
    data = torch.utils.data.TensorDataset(x, y, torch.arange(N))
    model, opt = _built(port, Linear)
    return _epochs(port, model, opt, _xy_step(model, opt), _global(port, DataLoader(data, batch_size, sampler=sampler)))


def weighted_sampler(port) -> dict:
    """Every DDP rank draws the same indices from torch's default generator (seeded alike)."""
    torch.manual_seed(5)
    return _sampled(port, WeightedRandomSampler(torch.linspace(0.1, 1.0, N, dtype=F64), num_samples=16))


def subset_sampler(port) -> dict:
    torch.manual_seed(6)
    return _sampled(port, SubsetRandomSampler(list(range(0, N, 2)) + [1, 3]))


def distributed_sampler_drop_last(port) -> dict:
    x, y = _features(4)
    data, samplers = torch.utils.data.TensorDataset(x, y, torch.arange(N)), []

    def loader(ctx):
        samplers.append(DistributedSampler(data, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id,
                                           shuffle=True, seed=7, drop_last=True))
        return DataLoader(data, batch_size=3, sampler=samplers[-1])
    model, opt = _built(port, Linear)
    return _epochs(port, model, opt, _xy_step(model, opt), _pipelines(port, loader),
                   lambda e: [s.set_epoch(e) for s in samplers])


class DropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop, self.head = nn.Linear(WIDTH, 8), nn.Dropout(0.3), nn.Linear(8, CLASSES)

    def forward(self, x):
        return self.head(self.drop(F.relu(self.fc(x))))


def per_pipeline_dropout(port) -> dict:
    """Each pipeline's loader draws its base seed from torch's default generator at each epoch, as each rank's
    does from its own; the step's dropout draws from it too."""
    x, y = _features(5)
    data, samplers = torch.utils.data.TensorDataset(x, y, torch.arange(N)), []

    def loader(ctx):
        samplers.append(DistributedSampler(data, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id,
                                           shuffle=True, seed=8))
        return DataLoader(data, batch_size=3, sampler=samplers[-1])
    model, opt = _built(port, DropoutNet)
    return _epochs(port, model, opt, _xy_step(model, opt), _pipelines(port, loader),
                   lambda e: [s.set_epoch(e) for s in samplers])


LOADER_PROGRAMS = {f.__name__: f for f in (
    bucket_sampler_per_rank, bucket_sampler_unsplit, iterable_split_by_dist, iterable_split_by_env,
    iterable_per_pipeline, reproducible_workers, weighted_sampler, subset_sampler, distributed_sampler_drop_last,
    per_pipeline_dropout)}
