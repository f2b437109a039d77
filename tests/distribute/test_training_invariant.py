"""The invariant of synchronous training: N replicas on the same global batches give the same
parameters as one device, for Mirrored and CentralStorage, SGD with momentum and Adam.

The runs are in float64. N replicas sum a gradient in another order than one device's GEMM does, and
in float32 that reassociation (a few ulps, which ulps depends on the CPU's kernels: AVX2, AVX-512,
oneDNN on Intel or AMD) is amplified by Adam's g / sqrt(v) for near-zero gradients to ~1e-6 of a
parameter, so no fixed float32 tolerance holds on every CPU. In float64 the same reassociation is
~1e-16 relative and the tolerances below leave six orders of magnitude to spare, while a real
mistake (a missed sum, a wrong divisor) is ~1e-2. The float32 update path itself is compared
bit for bit in test_optimizer_shards.py, with the sums made in the same order.
"""

import pytest
import torch

import multidev as md

RTOL, ATOL = 1e-9, 1e-11


@pytest.fixture(autouse=True)
def _float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)

GLOBAL_BATCH = 8
NUM_EXAMPLES = 29  # 3 full batches and an uneven last batch of 5


def _data():
    g = torch.Generator().manual_seed(123)
    x = torch.randn(NUM_EXAMPLES, 5, generator=g)
    y = torch.randn(NUM_EXAMPLES, 1, generator=g)
    return [(x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH]) for i in range(0, NUM_EXAMPLES, GLOBAL_BATCH)]


def _model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _optimizer(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.Adam(params, lr=0.01)


def _reference(opt_name, epochs=2):
    model = _model()
    opt = _optimizer(opt_name, model.parameters())
    for _ in range(epochs):
        for x, y in _data():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).sum(1).mean()
            loss.backward()
            opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _split(t, n):
    return md.distribute.PerReplica(tuple(torch.tensor_split(t, n)))


def _distributed(strategy, opt_name, epochs=2):
    with strategy.scope():
        model = _model()
        opt = _optimizer(opt_name, model.parameters())

    def step(x, y):
        opt.zero_grad()
        per_example = ((model(x) - y) ** 2).sum(1)
        loss = md.nn.compute_average_loss(per_example, global_batch_size=batch_size)
        loss.backward()
        opt.step()
        return loss

    n = strategy.num_replicas_in_sync
    for _ in range(epochs):
        for x, y in _data():
            batch_size = len(x)
            strategy.run(step, args=(_split(x, n), _split(y, n)))
    return model


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("kind", ["mirrored", "central"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_n_replicas_match_one_device(n, kind, opt_name):
    devices = [f"/cpu:{i}" for i in range(n)]
    if kind == "mirrored":
        strategy = md.distribute.MirroredStrategy(devices)
    else:
        strategy = md.distribute.experimental.CentralStorageStrategy(devices)
    model = _distributed(strategy, opt_name)
    expected = _reference(opt_name)
    for p, e in zip(model.parameters(), expected):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e, rtol=RTOL, atol=ATOL)


def test_replica_with_empty_batch_still_matches():
    """A last batch of 2 over 4 replicas leaves two replicas with no examples."""
    strategy = md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    with strategy.scope():
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 5)
    y = torch.randn(2, 1)

    def step(x, y):
        opt.zero_grad()
        md.nn.compute_average_loss(((model(x) - y) ** 2).sum(1), global_batch_size=2).backward()
        opt.step()

    strategy.run(step, args=(_split(x, 4), _split(y, 4)))
    ref = _model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ((ref(x) - y) ** 2).sum(1).mean().backward()
    ref_opt.step()
    for p, e in zip(model.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=RTOL, atol=ATOL)
