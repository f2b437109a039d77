"""PyTorch input as a PyTorch user has it: a ``torch.utils.data.DataLoader`` given to
``experimental_distribute_dataset`` (each batch is the global batch, split per replica, an uneven
last batch spread as TensorFlow spreads it) or returned by ``distribute_datasets_from_function``."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import multidev as md

X = torch.arange(20.0).reshape(10, 2)
Y = torch.arange(10)


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _local(strategy, value):
    return [t.tolist() for t in strategy.experimental_local_results(value)]


def test_a_dataloader_batch_is_the_global_batch_split_in_order(strategy):
    loader = DataLoader(TensorDataset(X, Y), batch_size=4)
    batches = [(_local(strategy, x), _local(strategy, y)) for x, y in strategy.experimental_distribute_dataset(loader)]
    assert [y for _, y in batches] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8], [9]]]   # 2 over 2: [1, 1]
    assert batches[0][0] == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]]
    same = md.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    assert [_local(strategy, y) for _, y in strategy.experimental_distribute_dataset(same)] == [y for _, y in batches]


def test_training_on_a_dataloader_equals_one_device(strategy):
    def train(strat, loader):
        torch.manual_seed(0)
        with strat.scope():
            model = torch.nn.Linear(2, 1, dtype=torch.float64)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            per_example = (model(x.double()).squeeze(1) - y.double()) ** 2
            md.nn.compute_average_loss(per_example, global_batch_size=4).backward()
            opt.step()

        for x, y in strat.experimental_distribute_dataset(loader):
            strat.run(step, args=(x, y))
        return [p.detach().clone() for p in model.parameters()]

    loader = DataLoader(TensorDataset(X[:8], Y[:8]), batch_size=4)
    one = train(md.distribute.OneDeviceStrategy("/cpu:0"), loader)
    two = train(strategy, loader)
    for a, b in zip(one, two):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_dataloader_from_distribute_datasets_from_function(strategy):
    def dataset_fn(ctx):
        return DataLoader(TensorDataset(Y), batch_size=ctx.get_per_replica_batch_size(4))

    got = [_local(strategy, y) for (y,) in strategy.distribute_datasets_from_function(dataset_fn)]
    assert got == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], []]]   # one pipeline: replicas take turns (TF)


def test_a_torch_dataset_of_examples_is_refused_saying_how_to_batch_it(strategy):
    with pytest.raises(TypeError, match=r"TensorDataset .* yields single examples.*DataLoader\(dataset, "
                                        r"batch_size=GLOBAL_BATCH_SIZE\)"):
        strategy.experimental_distribute_dataset(TensorDataset(X, Y))
    with pytest.raises(TypeError, match="expects a md.data.Dataset or a torch.utils.data.DataLoader, got list"):
        strategy.experimental_distribute_dataset([1, 2, 3])
