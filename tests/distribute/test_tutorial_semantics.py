"""What the pytorch.org tutorials (``tests/programs/pytutorials*.py``) needed, at unit scale:

* a plain tensor that several replicas' ``loss.backward()`` reach in one run (free tensors updated by
  hand) raises ``ValueError`` naming ``md.Variable``; leaves each replica has its own pass;
* replica r > 0 continues its own torch random stream from run to run, as DDP's rank r does, unless the
  caller re-seeds or draws between runs;
* ``experimental_local_results`` shows a cross-replica ``load_state_dict`` on every copy.
"""
from __future__ import annotations

import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _halves(strategy, x):
    return strategy.experimental_distribute_values_from_function(lambda ctx: x.chunk(2)[ctx.replica_id_in_sync_group])


@pytest.mark.parametrize("make", [lambda: torch.full((), 0.5, dtype=torch.float64, requires_grad=True),
                                  lambda: (torch.randn((), dtype=torch.float64) / 2).requires_grad_()],
                         ids=["full", "requires_grad_"])
def test_free_tensor_updated_by_hand_is_refused(strategy, make):
    with strategy.scope():
        a = make()
    x = _halves(strategy, torch.arange(4.0, dtype=torch.float64))

    def warm_up(x):   # a first run with no backward does not end the checks of this step function
        return x.sum()

    def step(x, backward):
        if not backward:
            return warm_up(x)
        loss = (a * x).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a.sub_(0.01 * a.grad)
            a.grad = None
        return loss.detach()

    strategy.run(step, args=(x, False))
    with pytest.raises(ValueError, match="another replica's backward reached") as err:
        strategy.run(step, args=(x, True))
    assert "md.Variable" in str(err.value) and "shapes [()]" in str(err.value)


def test_leaves_of_each_replica_pass(strategy):
    """A replica's slice with ``requires_grad = True`` (FGSM's input gradient) beside mirrored weights."""
    with strategy.scope():
        model = torch.nn.Linear(3, 1, dtype=torch.float64)
    def step(x):
        x.requires_grad = True
        model(x).sum().backward()
        return x.grad.sum()

    for _ in range(2):   # the second run: the check done, no walk
        x = _halves(strategy, torch.arange(12.0, dtype=torch.float64).reshape(4, 3))
        grads = strategy.experimental_local_results(strategy.run(step, args=(x,)))
        expected = 2 * float(model.weight.detach().sum())   # 2 rows a replica, each row's gradient the weight
        assert [float(g) for g in grads] == pytest.approx([expected, expected])


def test_replicas_continue_their_own_random_streams(strategy):
    """Replica 1 draws 3 numbers in the first run, replica 0 one; in the next run each continues its
    own stream, as ranks seeded alike do; a re-seed in the caller restarts both from the seed."""
    def step(counts):
        n = int(counts[md.distribute.get_replica_context().replica_id_in_sync_group])
        return torch.rand(n, dtype=torch.float64)[-1]

    def rank(draws_before):   # what a rank seeded with 5 draws after `draws_before` draws
        return float(torch.rand(draws_before + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(5))[-1])

    torch.manual_seed(5)
    first = strategy.experimental_local_results(strategy.run(step, args=([1, 3],)))
    second = strategy.experimental_local_results(strategy.run(step, args=([1, 1],)))
    assert [float(v) for v in first] == [rank(0), rank(2)]
    assert [float(v) for v in second] == [rank(1), rank(3)]
    torch.manual_seed(5)
    again = strategy.experimental_local_results(strategy.run(step, args=([1, 1],)))
    assert [float(v) for v in again] == [rank(0), rank(0)]


def test_local_results_show_a_cross_replica_load_state_dict(strategy):
    with strategy.scope():
        model = torch.nn.Linear(2, 2, dtype=torch.float64)
    new = {k: torch.full_like(v, 3.0) for k, v in model.state_dict().items()}
    model.load_state_dict(new)
    for copy in strategy.experimental_local_results(model.weight):
        assert float(torch.as_tensor(copy.numpy()).sum()) == 12.0


def test_backward_with_inputs_checks_only_those(strategy):
    """``loss.backward(inputs=[w])`` accumulates into ``w`` only: a shared tensor elsewhere in the graph
    (given no ``.grad``) passes."""
    with strategy.scope():
        model = torch.nn.Linear(2, 1, bias=False, dtype=torch.float64)
        shared = torch.ones(2, dtype=torch.float64, requires_grad=True)
    x = _halves(strategy, torch.arange(4.0, dtype=torch.float64).reshape(2, 2))

    def step(x):
        model(x * shared).sum().backward(inputs=[model.weight])
        return model.weight.grad.sum()

    grads = strategy.experimental_local_results(strategy.run(step, args=(x,)))
    assert [float(g) for g in grads] == [3.0, 3.0] and shared.grad is None   # the mean of rows (0, 1) and (2, 3)
