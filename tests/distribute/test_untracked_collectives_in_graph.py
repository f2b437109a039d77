"""``torch.distributed.all_reduce`` / ``all_gather`` on a tensor in autograd's graph inside ``strategy.run``
(Barlow Twins' ``torch.distributed.all_reduce(c)`` of its cross-correlation matrix in ``forward``). Autograd does
not see those collectives: under DDP the gradient passes through to each rank's own tensor unreduced. The
refusal named ``get_replica_context().all_reduce('sum', value)``, which is differentiable (TensorFlow's rule:
its gradient is all-reduced), and the program so ported trained silently to other weights than DDP's (the
gradient twice DDP's on 2 replicas: 0.68 apart after 3 steps, ``tests/programs/loss_programs5.py``). Now the
refusal says so and names the spelling that keeps DDP's gradient, which this test follows."""

import pytest
import torch
import torch.distributed as dist

import multidev as md

F64 = torch.float64
PASSTHROUGH = "all_reduce('sum', c.detach()) + (c - c.detach())"


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _halves(t):
    return md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))


def _refusal(strategy, fn) -> str:
    with pytest.raises(ValueError) as err:
        strategy.run(fn)
    return str(err.value)


def test_an_all_reduce_in_the_graph_names_the_passthrough(strategy):
    with strategy.scope():
        w = md.Variable(torch.ones(3, dtype=F64))
    msg = _refusal(strategy, lambda: dist.all_reduce(w * 2))
    assert "requires grad" in msg and PASSTHROUGH in msg and "world size times" in msg, msg
    msg = _refusal(strategy, lambda: dist.all_reduce(tensor=w * 2))
    assert PASSTHROUGH in msg, msg
    plain = _refusal(strategy, lambda: dist.all_reduce((w * 2).detach()))   # a metric: no such note
    assert "get_replica_context().all_reduce('sum', value)" in plain and PASSTHROUGH not in plain


def test_an_all_gather_in_the_graph_names_the_detached_gather(strategy):
    with strategy.scope():
        w = md.Variable(torch.ones(3, dtype=F64))
    z = lambda: w * 2  # noqa: E731
    msg = _refusal(strategy, lambda: dist.all_gather([torch.empty(3), torch.empty(3)], z()))
    assert "all_gather(z.detach(), axis=0)" in msg, msg
    assert "z.detach()" not in _refusal(strategy, lambda: dist.all_gather([torch.empty(3)] * 2, z().detach()))

    class FullGatherLayer(torch.autograd.Function):   # VICReg's: its backward all-reduces (differentiable)
        @staticmethod
        def forward(ctx, x):
            output = [torch.zeros_like(x) for _ in range(2)]
            dist.all_gather(output, x)
            return tuple(output)

        @staticmethod
        def backward(ctx, *grads):
            return torch.stack(grads).sum(0)

    msg = _refusal(strategy, lambda: FullGatherLayer.apply(z()))
    assert "all_gather(value, axis=0)" in msg and "z.detach()" not in msg, msg


def test_the_passthrough_gives_ddps_gradient(strategy):
    """A loss of the summed matrix ``c`` (Barlow Twins' shape): each replica's gradient flows through its own
    ``c`` (DDP's), then the replicas' gradients are averaged; ``all_reduce('sum', c)`` gives twice that."""
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Linear(4, 3, bias=False).double()
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1), dtype=F64)

    def loss_of(c):
        return (torch.diagonal(c) - 1).pow(2).sum() + 0.1 * c.pow(2).sum()

    def step(part, passthrough):
        model.zero_grad()
        z = model(part)
        c = z.T @ z / 8
        ctx = md.distribute.get_replica_context()
        c = ctx.all_reduce("sum", c.detach()) + (c - c.detach()) if passthrough else ctx.all_reduce("sum", c)
        loss_of(c).backward()
        return model.weight.grad.clone()

    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3, bias=False).double()
    cs = [ref(p).T @ ref(p) / 8 for p in torch.tensor_split(x, 2)]
    total = (cs[0] + cs[1]).detach().requires_grad_()
    (g,) = torch.autograd.grad(loss_of(total), [total])
    ddp = torch.autograd.grad(sum((c * g).sum() for c in cs) / 2, [ref.weight])[0]   # each rank's, averaged
    for passthrough, expected in ((True, ddp), (False, 2 * ddp)):
        got = strategy.experimental_local_results(strategy.run(step, args=(_halves(x), passthrough)))
        for grad in got:
            torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)
