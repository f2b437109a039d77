"""``copy.deepcopy(model)`` inside ``strategy.run`` (``multidev/distribute/replica_dicts.py``): the calling
replica's own module, as each DDP rank's deep copy is its own: plain parameters holding the replica's copy,
an inner optimizer that moves them by the replica's gradient alone (Reptile, first-order MAML). Before, each
replica made a new distributed variable: the inner gradients were summed across replicas and the update
went to one replica's copy, silently."""

from __future__ import annotations

import copy

import pytest
import torch

import multidev as md

DEVICES = ["/cpu:0", "/cpu:1"]
F64 = torch.float64


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(DEVICES)


def _model(strategy):
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1)).double()
        meta_optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return model, meta_optimizer


def _per_replica(*values):
    return md.distribute.PerReplica(tuple(torch.as_tensor(v, dtype=F64) for v in values))


def _adapted(model: torch.nn.Module, x: torch.Tensor, steps: int = 2) -> torch.nn.Module:
    """A task's inner loop: SGD on a deep copy."""
    learner = copy.deepcopy(model)
    inner = torch.optim.SGD(learner.parameters(), lr=0.1)
    for _ in range(steps):
        loss = learner(x).pow(2).mean()
        inner.zero_grad()
        loss.backward()
        inner.step()
    return learner


X = ([[1.0, 0.0], [0.0, 2.0]], [[-1.0, 3.0], [2.0, 1.0]])


def test_the_copy_is_the_replicas_own_plain_module(strategy):
    model, _ = _model(strategy)
    before = [p.detach().clone() for p in model.parameters()]

    def step(x):
        learner = _adapted(model, x)
        assert all(type(p) is torch.nn.Parameter for p in learner.parameters())
        assert all(type(b) is torch.Tensor for b in learner.buffers())
        return torch.cat([p.detach().reshape(-1) for p in learner.parameters()])

    got = strategy.experimental_local_results(strategy.run(step, args=(_per_replica(*X),)))
    for replica, x in enumerate(X):
        reference = copy.deepcopy(model)   # outside the run: a distributed copy; its values as DDP's rank's
        plain = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1)).double()
        plain.load_state_dict(reference.state_dict())
        expected = torch.cat([p.detach().reshape(-1) for p in _adapted(plain, torch.tensor(x, dtype=F64)).parameters()])
        assert torch.equal(got[replica], expected), replica
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before)), "the model is not moved"


def test_tied_weights_stay_tied_in_the_copy(strategy):
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)).double()
        model[1].weight = model[0].weight

    def step():
        learner = copy.deepcopy(model)
        return torch.tensor(float(learner[1].weight is learner[0].weight and len(list(learner.parameters())) == 3))

    assert [float(v) for v in strategy.experimental_local_results(strategy.run(step))] == [1.0, 1.0]


def test_first_order_maml_gives_one_devices_update(strategy):
    """The outer gradients set by hand (``p.grad = ...`` from each task's copy) are summed by the meta
    optimizer's step across replicas: one device's update over both replicas' tasks."""
    model, meta_optimizer = _model(strategy)
    torch.manual_seed(0)
    one = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1)).double()
    one_optimizer = torch.optim.SGD(one.parameters(), lr=0.5)

    def outer(net, x):
        learner = _adapted(net, x)
        learner.zero_grad()
        learner(x).pow(2).mean().backward()
        for p, lp in zip(net.parameters(), learner.parameters()):
            p.grad = lp.grad / 2 if p.grad is None else p.grad + lp.grad / 2

    def step(x):
        meta_optimizer.zero_grad()
        outer(model, x)
        meta_optimizer.step()

    strategy.run(step, args=(_per_replica(*X),))
    one_optimizer.zero_grad()
    for x in X:
        outer(one, torch.tensor(x, dtype=F64))
    one_optimizer.step()
    for p, q in zip(model.parameters(), one.parameters()):
        assert torch.allclose(p.detach(), q.detach(), rtol=0, atol=1e-12)
