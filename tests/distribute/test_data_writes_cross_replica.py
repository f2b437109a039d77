"""Writes through ``p.data`` in cross-replica context reach every replica's copy: torch's version
counter does not see them (``.data`` has its own), so before this each replica but the first kept
its old value and the replicas computed different models, silently (pytorch/examples' siamese
network initialises ``m.bias.data.fill_(0.01)`` in ``__init__``, inside the scope)."""

from __future__ import annotations

import pytest
import torch

import multidev as md

F64 = torch.float64


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _outputs(strategy, model) -> list:
    x = md.distribute.PerReplica((torch.ones(1, 3, dtype=F64), torch.ones(1, 3, dtype=F64)))
    return [float(v) for v in strategy.experimental_local_results(strategy.run(lambda t: model(t).sum().detach(), args=(x,)))]


def test_data_write_in_the_scope_and_after_it_reaches_every_replica(strategy):
    with strategy.scope():
        model = torch.nn.Linear(3, 1).double()
        model.bias.data.fill_(0.01)              # an __init__'s write, after the parameter exists
        torch.nn.init.xavier_uniform_(model.weight)
    first = _outputs(strategy, model)
    assert first[0] == first[1]
    assert [c.tolist() for c in model.bias.values] == [[0.01], [0.01]]
    model.weight.data.mul_(0.5)                  # between runs, cross-replica
    copies = model.weight.values                 # read before any run: already every replica's
    assert torch.equal(copies[0], copies[1])
    model.bias.data = model.bias.data + 1.0      # .data = ... (already every replica's)
    second = _outputs(strategy, model)
    assert second[0] == second[1] != first[0]
    assert [c.tolist() for c in model.bias.values] == [[1.01], [1.01]]


def test_data_in_a_replica_is_that_replica_copy(strategy):
    with strategy.scope():
        model = torch.nn.Linear(3, 1).double()

    def step():
        return model.bias.data.data_ptr()
    ptrs = strategy.experimental_local_results(strategy.run(step))
    assert list(ptrs) == [c.data_ptr() for c in model.bias.values]
