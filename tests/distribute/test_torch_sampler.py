"""A torch DataLoader with a ``DistributedSampler`` (DDP's input) given to a strategy: a sampler of the
job's workers makes each loader batch this worker's share, split across its replicas only; any other
layout raises ``ValueError`` naming the sampler and both fixes (``distribute/torch_sampler.py``).
One process here (MirroredStrategy on 2 CPUs: one worker); the workers' case is
``tests/programs`` (the DDP tutorial's Trainer, equal to DDP on 2 Gloo processes)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset

import multidev as md

DATA = TensorDataset(torch.arange(12.0).reshape(12, 1))


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _rows(strategy, dataset) -> list:
    """Each step's rows per replica, from ``dataset`` distributed by ``strategy``."""
    return [[v[0].reshape(-1).tolist() for v in strategy.experimental_local_results(x)] for x in dataset]


def test_sampler_of_the_job_gives_each_loader_batch_split_across_the_replicas(strategy):
    loader = DataLoader(DATA, batch_size=4, sampler=DistributedSampler(DATA, num_replicas=1, rank=0, shuffle=False))
    assert _rows(strategy, strategy.experimental_distribute_dataset(loader)) == [
        [[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]], [[8.0, 9.0], [10.0, 11.0]]]


def test_set_epoch_reshuffles_each_pass_as_the_sampler_orders(strategy):
    sampler = DistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=3)
    dist = strategy.experimental_distribute_dataset(DataLoader(DATA, batch_size=6, sampler=sampler))
    passes = []
    for epoch in (0, 1, 1):
        sampler.set_epoch(epoch)
        passes.append([x for step in _rows(strategy, dist) for part in step for x in part])
        assert passes[-1] == [float(i) for i in sampler]   # the sampler's order, every example once
    assert passes[0] != passes[1] and passes[1] == passes[2]


@pytest.mark.parametrize("wrap", ["sampler", "batch_sampler", "from_torch"])
def test_sampler_of_another_layout_is_refused(strategy, wrap):
    sampler = DistributedSampler(DATA, num_replicas=2, rank=0)
    if wrap == "batch_sampler":
        data = DataLoader(DATA, batch_sampler=BatchSampler(sampler, batch_size=4, drop_last=False))
    else:
        data = DataLoader(DATA, batch_size=4, sampler=sampler)
        if wrap == "from_torch":
            data = md.data.Dataset.from_torch(data).map(lambda x: (x,))
    with pytest.raises(ValueError, match=r"sampler DistributedSampler\(num_replicas=2, rank=0\) gives it 1/2 of the "
                                         r"data, but this job has 1 worker process\(es\) and this is worker 0.*"
                                         r"DistributedSampler\(dataset, num_replicas=1, rank=0\).*drop the sampler"):
        strategy.experimental_distribute_dataset(data)


class ShardSampler(torch.utils.data.Sampler):
    """A distributed sampler that is no DistributedSampler (as timm's OrderedDistributedSampler)."""

    def __init__(self, n, num_replicas, rank):
        self.n, self.num_replicas, self.rank = n, num_replicas, rank

    def __iter__(self):
        return iter(range(self.rank, self.n, self.num_replicas))

    def __len__(self):
        return len(range(self.rank, self.n, self.num_replicas))


def test_a_sampler_built_like_distributed_sampler_is_read_alike(strategy):
    with pytest.raises(ValueError, match=r"ShardSampler\(num_replicas=3, rank=1\)"):
        strategy.experimental_distribute_dataset(DataLoader(DATA, batch_size=4, sampler=ShardSampler(12, 3, 1)))
    ok = strategy.experimental_distribute_dataset(DataLoader(DATA, batch_size=4, sampler=ShardSampler(12, 1, 0)))
    assert len(_rows(strategy, ok)) == 3


def test_datasets_from_function_take_their_pipeline_sampler(strategy):
    """One worker, one input pipeline (TF's count for MirroredStrategy): its batches go to the replicas
    in turn; a sampler of another count would leave out part of the data."""
    def pipeline(ctx):
        sampler = DistributedSampler(DATA, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id,
                                     shuffle=False)
        return DataLoader(DATA, batch_size=2, sampler=sampler)
    rows = _rows(strategy, strategy.distribute_datasets_from_function(pipeline))
    assert rows == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]], [[8.0, 9.0], [10.0, 11.0]]]

    def per_replica(ctx):
        return DataLoader(DATA, batch_size=2, sampler=DistributedSampler(DATA, num_replicas=2, rank=0))
    with pytest.raises(ValueError, match=r"this job has 1 input pipeline\(s\) and this is pipeline 0.*"
                                         r"num_replicas=1, rank=0\) \(input_context.num_input_pipelines"):
        strategy.distribute_datasets_from_function(per_replica)


def test_keras_fit_refuses_a_sampler_of_another_layout(strategy):
    xy = TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
    with strategy.scope():
        model = md.keras.Sequential([md.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    loader = DataLoader(xy, batch_size=4, sampler=DistributedSampler(xy, num_replicas=2, rank=1))
    for call in (model.fit, model.evaluate, model.predict):
        with pytest.raises(ValueError, match=r"DistributedSampler\(num_replicas=2, rank=1\)"):
            call(loader, verbose=0)
