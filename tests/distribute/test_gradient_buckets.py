"""Gradient buckets reuse their flat buffers step after step, unless something still holds a
gradient handed out from them."""

import torch

import multidev as md
from multidev.distribute.gradient_buckets import BucketBuffers, unpack_bucket

PR = md.distribute.PerReplica


def _refs():
    return [torch.zeros(3, requires_grad=True), torch.zeros(2, 2, requires_grad=True)]


def _step(buffers, refs, grads):
    flat = buffers.pack(0, refs, grads, [0, 1])
    out = [None, None]
    unpack_bucket(flat, refs, [0, 1], out)
    for r, g in zip(refs, out):
        r.grad = g
    return flat.data_ptr()


def test_buffer_reused_when_only_grads_hold_it():
    refs, buffers = _refs(), BucketBuffers()
    first = _step(buffers, refs, [torch.ones(3), torch.ones(2, 2)])
    for r in refs:
        r.grad = None  # zero_grad(set_to_none=True)
    assert _step(buffers, refs, [torch.full((3,), 2.0), torch.full((2, 2), 2.0)]) == first
    for r in refs:
        r.grad.zero_().add_(5.0)  # zero_grad(set_to_none=False), then backward accumulates in place
    assert _step(buffers, refs, [r.grad for r in refs]) == first
    assert refs[0].grad.tolist() == [5.0] * 3 and refs[1].grad.tolist() == [[5.0, 5.0]] * 2


def test_held_gradient_or_view_of_one_never_changes():
    refs, buffers = _refs(), BucketBuffers()
    _step(buffers, refs, [torch.ones(3), torch.ones(2, 2)])
    kept, kept_view = refs[0].grad, refs[1].grad[0]
    for r in refs:
        r.grad = None
    _step(buffers, refs, [torch.full((3,), 7.0), torch.full((2, 2), 7.0)])
    assert kept.tolist() == [1.0] * 3 and kept_view.tolist() == [1.0, 1.0]
    assert refs[0].grad.tolist() == [7.0] * 3


def test_all_reduce_path_with_kept_gradients_and_accumulation():
    """An optimizer subclass takes the bucketed all-reduce; a gradient kept from one step is not
    overwritten by the next, and gradients accumulated over two backward passes are summed."""
    class MySGD(torch.optim.SGD):
        pass

    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        layer = torch.nn.Linear(2, 1, bias=False)
        opt = MySGD(layer.parameters(), lr=0.0)
    kept = []

    def step(x, accumulate):
        opt.zero_grad(set_to_none=not accumulate)
        md.nn.compute_average_loss(layer(x).sum(1), global_batch_size=1).backward()   # summed across replicas
        if accumulate:
            md.nn.compute_average_loss(layer(x).sum(1), global_batch_size=1).backward()
        opt.step()
        kept.append(layer.weight.grad)
        return layer.weight.grad.clone()

    x = PR((torch.ones(1, 2), torch.full((1, 2), 2.0)))
    first = strategy.experimental_local_results(strategy.run(step, args=(x, False)))
    assert all(torch.equal(g, torch.full((1, 2), 3.0)) for g in first)
    strategy.run(step, args=(PR((torch.zeros(1, 2), torch.zeros(1, 2))), False))
    assert all(torch.equal(k, torch.full((1, 2), 3.0)) for k in kept[:2]), "step 1's gradients kept intact"
    third = strategy.experimental_local_results(strategy.run(step, args=(x, True)))
    assert all(torch.equal(g, torch.full((1, 2), 6.0)) for g in third)
