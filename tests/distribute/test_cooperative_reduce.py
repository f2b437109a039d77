"""Replicas on one CPU reduce large tensors cooperatively, in cache-sized chunks (collectives/algorithms.py):
the results must be the exact sums whatever the chunk boundaries (parts longer than several chunks, a
short tail, integer MEAN rounding down), through the public API as programs call it."""

import pytest
import torch

import multidev as md
from multidev._core.enums import ReduceOp
from multidev.collectives import algorithms

# Far above the 1 MiB chunk over all replicas, and not a multiple of it: every replica's part has
# several whole chunks and a short tail.
NUMEL = 300_001


def _values(r: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(r)
    if dtype.is_floating_point:
        return torch.randn(NUMEL, generator=g, dtype=dtype)
    return torch.randint(-1000, 1000, (NUMEL,), generator=g, dtype=dtype)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MEAN])
def test_reduce_slice_in_place_matches_one_pass(n, op):
    """What loss.backward() runs on 2 CPU replicas: each replica reduces its part in place into every
    replica's gradient; together they give every replica the sum in replica order (bitwise)."""
    grads = [_values(r) for r in range(n)]
    expected = grads[0] + grads[1]
    for g in grads[2:]:
        expected = expected + g
    if op is ReduceOp.MEAN:
        expected = expected / n
    for r in range(n):   # the replicas' threads, one after another here
        algorithms.reduce_slice(grads, grads, algorithms.replica_slice(NUMEL, r, n), op)
    for g in grads:
        assert torch.equal(g, expected)


def test_reduce_slice_integer_mean_rounds_down_into_separate_outputs():
    inputs = [_values(r, torch.int64) for r in range(2)]
    outputs = [torch.full((NUMEL,), 7, dtype=torch.int64) for _ in range(2)]
    before = [t.clone() for t in inputs]
    part = slice(12_345, NUMEL - 3)
    algorithms.reduce_slice(inputs, outputs, part, ReduceOp.MEAN)
    expected = torch.div(inputs[0] + inputs[1], 2, rounding_mode="floor")
    for o in outputs:
        assert torch.equal(o[part], expected[part])
        assert (o[:part.start] == 7).all() and (o[part.stop:] == 7).all()   # nothing outside the part
    assert all(torch.equal(a, b) for a, b in zip(inputs, before))


def test_large_all_reduce_and_backward_on_three_cpu_replicas():
    """``ctx.all_reduce`` of a 2.4 MB tensor (the cooperative path) gives every replica the exact sum, and
    a gradient of 300k elements reduced in ``loss.backward()`` the exact mean (DDP's, for a loss that did
    not go through compute_average_loss)."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    with strategy.scope():
        module = torch.nn.Module()
        module.weight = torch.nn.Parameter(torch.ones(NUMEL, dtype=torch.float64))

    def fn():
        r = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        x = _values(r)
        summed = md.distribute.get_replica_context().all_reduce("SUM", x)
        (module.weight * x).sum().backward()
        return summed, module.weight.grad.clone()

    summed, grads = strategy.run(fn)
    expected = _values(0) + _values(1) + _values(2)
    for value in strategy.experimental_local_results(summed):
        assert torch.equal(value, expected)
    for grad in strategy.experimental_local_results(grads):
        assert torch.equal(grad, expected / 3)
