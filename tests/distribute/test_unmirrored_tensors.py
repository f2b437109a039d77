"""A tensor outside any ``torch.nn.Module`` is not mirrored, even when made in ``strategy.scope()``:
``optimizer.step()`` over it inside a run of several replicas is refused before anything is updated.

Every replica's backward adds into its one ``.grad`` and every replica's step updates it: beside a
module's mirrored parameters it trained 4x the one-device step, silently. ``md.Variable`` in the scope
(TF's rule: variables created in the scope are mirrored) trains as one device does.
"""

from __future__ import annotations

import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


X = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)


def _train(strategy, make_free_weight):
    """One SGD step over a free-standing weight and a Linear's, both made in the scope."""
    with strategy.scope():
        free = make_free_weight()
        linear = torch.nn.Linear(3, 1, bias=False, dtype=torch.float64)
        torch.nn.init.ones_(linear.weight)
        opt = torch.optim.SGD([free, *linear.parameters()], lr=0.1)
    dataset = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices(X).batch(4))

    def step(xb):
        opt.zero_grad()
        loss = ((xb * free).sum(1) ** 2).mean() + (linear(xb) ** 2).mean()
        loss.backward()
        opt.step()

    for xb in dataset:
        strategy.run(step, args=(xb,))
    return free, linear


def _one_device():
    free = torch.ones(3, dtype=torch.float64, requires_grad=True)
    loss = ((X * free).sum(1) ** 2).mean()
    loss.backward()
    return free.detach() - 0.1 * free.grad


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Parameter(torch.ones(3, dtype=torch.float64)),
    lambda: torch.ones(3, dtype=torch.float64, requires_grad=True),
], ids=["bare_parameter", "leaf_tensor"])
def test_free_tensor_beside_mirrored_parameters_is_refused_before_any_update(strategy, make):
    made = []
    with pytest.raises(ValueError, match="not mirrored") as err:
        _train(strategy, lambda: made.append(make()) or made[0])
    assert "md.Variable" in str(err.value) and "shapes [(3,)]" in str(err.value)
    assert torch.equal(made[0].detach(), torch.ones(3, dtype=torch.float64))    # nothing stepped


def test_free_tensor_alone_is_refused(strategy):
    with strategy.scope():
        free = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([free], lr=0.1)

    def step(x):
        opt.zero_grad()
        (free * x).sum().backward()
        opt.step()

    with pytest.raises(ValueError, match="outside any torch.nn.Module"):
        strategy.run(step, args=(torch.ones(3),))
    assert torch.equal(free.detach(), torch.ones(3))


def test_md_variable_in_the_scope_trains_as_one_device(strategy):
    free, linear = _train(strategy, lambda: md.Variable(torch.ones(3, dtype=torch.float64)))
    torch.testing.assert_close(torch.as_tensor(free.numpy()), _one_device())
    torch.testing.assert_close(linear.weight.detach()[0], _one_device())   # same loss shape: same update
