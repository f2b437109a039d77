"""PyTorch idioms beside the programs of tests/programs/idioms.py, on 2 replicas: LBFGS's line
search decides on the global batch's loss, an optimizer that re-evaluates its closure (or a plan
whose replicas share one copy) is refused, a manual update from ``torch.autograd.grad`` trains as one
device once its gradients are all-reduced and is refused otherwise, sparse gradients stay sparse."""

import pytest
import torch
from torch.nn import functional as F

import multidev as md
from multidev.distribute.gradient_buckets import pack_bucket, unpack_bucket

PR = md.distribute.PerReplica
TWO_CPUS = ["/cpu:0", "/cpu:1"]


def _data():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (8,), generator=g)


def _model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).double()


def _split(*tensors):
    return tuple(PR(tuple(torch.tensor_split(t, 2))) for t in tensors)


def _lbfgs_step(model, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss
    return opt.step(closure)


def test_lbfgs_line_search_equals_one_device():
    """strong_wolfe reads the closure's loss: every replica sees the global batch's, so all take
    one device's steps (DDP's ranks would each see their own half's)."""
    x, y = _data()
    ref = _model()
    ref_opt = torch.optim.LBFGS(ref.parameters(), lr=1, max_iter=5, line_search_fn="strong_wolfe")
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
        opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=5, line_search_fn="strong_wolfe")
    for _ in range(2):
        expected = _lbfgs_step(ref, ref_opt, x, y)
        losses = strategy.run(_lbfgs_step, args=(model, opt) + _split(x, y))
        assert [float(v) for v in strategy.experimental_local_results(losses)] == pytest.approx([float(expected.detach())] * 2,
                                                                                                rel=1e-12)
    assert opt.state_dict()["state"][0]["n_iter"] == ref_opt.state_dict()["state"][0]["n_iter"]
    for got, want in zip(model.parameters(), ref.parameters()):
        for copy in got.values:
            torch.testing.assert_close(copy, want, rtol=1e-10, atol=1e-12)


def test_lbfgs_on_shared_storage_is_refused():
    strategy = md.distribute.experimental.CentralStorageStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
        opt = torch.optim.LBFGS(model.parameters(), max_iter=2)
    with pytest.raises(ValueError, match=r"LBFGS.step\(closure\) cannot run on CentralStorageStrategy.*re-evaluates"):
        strategy.run(_lbfgs_step, args=(model, opt) + _split(*_data()))


class TwiceSGD(torch.optim.SGD):   # a user's optimizer that evaluates its closure twice
    def step(self, closure=None):
        with torch.enable_grad():
            closure()
        return super().step(closure)


def test_an_optimizer_evaluating_its_closure_itself_trains_as_one_device():
    """A ``step`` written outside torch gets the closure whole and calls it when it wants (SAM's at the
    perturbed weights): each evaluation's backward reduces the gradients, as each DDP rank's (it was
    refused: multidev evaluated the closure once before the step, as for torch's own optimizers)."""
    x, y = _data()
    ref = _model()
    ref_opt = TwiceSGD(ref.parameters(), lr=0.1)
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
        opt = TwiceSGD(model.parameters(), lr=0.1)
    for _ in range(2):
        _lbfgs_step(ref, ref_opt, x, y)
        strategy.run(_lbfgs_step, args=(model, opt) + _split(x, y))
    for got, want in zip(model.parameters(), ref.parameters()):
        for copy in got.values:
            torch.testing.assert_close(copy, want, rtol=1e-10, atol=1e-12)


def _manual_step(reduce):
    def step(model, x, y):
        params = list(model.parameters())
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), params)
        if reduce:   # what the refusal's message suggests
            grads = md.distribute.get_replica_context().all_reduce("MEAN", list(grads))
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= 0.5 * g
    return step


def test_autograd_grad_update_trains_as_one_device_once_reduced():
    x, y = _data()
    ref = _model()
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
    for _ in range(2):
        _manual_step(False)(ref, x, y)
        strategy.run(_manual_step(True), args=(model,) + _split(x, y))
    for got, want in zip(model.parameters(), ref.parameters()):
        for copy in got.values:
            torch.testing.assert_close(copy, want, rtol=1e-12, atol=1e-14)


def test_autograd_grad_update_of_local_gradients_is_refused_at_once():
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
    with pytest.raises(ValueError, match=r"'Linear.weight:0' was written inside strategy.run outside an optimizer "
                                         r"step .*replica 1's copy now differs.*all_reduce\('MEAN', grads\)"):
        strategy.run(_manual_step(False), args=(model,) + _split(*_data()))


def test_equal_writes_and_cross_replica_writes_pass():
    """Every replica writing the same value (a constant, the reduced .grad) is fine; so is a write in
    cross-replica context, which reaches every copy at the next run."""
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        layer = torch.nn.Linear(2, 2).double()

    def fill():
        with torch.no_grad():
            layer.weight.fill_(0.5)

    strategy.run(fill)
    with torch.no_grad():
        layer.weight.add_(1.0)
    strategy.run(lambda: None)
    assert all(torch.equal(c, torch.full((2, 2), 1.5, dtype=torch.float64)) for c in layer.weight.values)


def test_a_sparse_gradient_travels_dense_in_buckets():
    """Buckets (GPUs, several processes) carry a sparse gradient dense; backward_reduce makes the sum
    sparse again."""
    refs = [torch.zeros(4, 2), torch.zeros(3)]
    sparse = torch.sparse_coo_tensor([[1, 3, 1]], torch.ones(3, 2), (4, 2), check_invariants=True)
    flat = pack_bucket(refs, [sparse, torch.ones(3)], [0, 1], out=torch.empty(4 * 2 + 3 + 2))
    out = [None, None]
    unpack_bucket(flat, refs, [0, 1], out)
    assert out[0].tolist() == [[0, 0], [2, 2], [0, 0], [1, 1]] and out[1].tolist() == [1, 1, 1]


def test_sparse_gradients_are_reduced_sparse():
    """nn.Embedding(sparse=True): loss.backward() leaves every replica the sparse mean over the rows
    any replica touched (SparseAdam refuses dense gradients), equal to one device's."""
    ids = torch.tensor([[0, 1], [1, 2], [5, 5], [5, 6]])
    torch.manual_seed(2)
    ref = torch.nn.Embedding(8, 3, sparse=True).double()
    ref(ids).pow(2).mean().backward()
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        torch.manual_seed(2)
        emb = torch.nn.Embedding(8, 3, sparse=True).double()

    def step(part):
        emb(part).pow(2).mean().backward()
        return emb.weight.grad.is_sparse, emb.weight.grad.coalesce().indices().tolist()

    result = strategy.run(step, args=(PR((ids[:2], ids[2:])),))
    assert result == (True, [[0, 1, 2, 5, 6]])
    for copy in emb.weight.values:
        torch.testing.assert_close(copy.grad.to_dense(), ref.weight.grad.to_dense(), rtol=1e-14, atol=0)


def test_error_if_nonfinite_raises_on_every_replica():
    """One replica's non-finite loss makes every replica's reduced gradient non-finite: the clip raises
    (as on one device and on every DDP rank) and nothing is updated."""
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.values[1].clone() for p in model.parameters()]
    x, y = _data()
    x[5, 0] = float("inf")   # in replica 1's half

    def step(xb, yb):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True, error_if_nonfinite=True)
        opt.step()

    with pytest.raises(RuntimeError, match="non-finite"):
        strategy.run(step, args=_split(x, y))
    assert all(torch.equal(p.values[1], b) for p, b in zip(model.parameters(), before))


def test_variables_that_may_differ_by_design_are_not_checked():
    """Aggregation NONE lets each replica keep its own value (TensorFlow's replica-local updates), even
    through a torch in-place op or ``.data``; ONLY_FIRST_REPLICA takes replica 0's at the next run."""
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    with strategy.scope():
        local = md.Variable(torch.zeros(2), aggregation="NONE")
        first = md.Variable(torch.zeros(2), aggregation="ONLY_FIRST_REPLICA")

    def step(x):
        loss = (local * x).sum() + (first * x).sum()
        g_local, g_first = torch.autograd.grad(loss, [local, first])
        with torch.no_grad():
            local.data.sub_(g_local)
            first.sub_(g_first)

    strategy.run(step, args=(PR((torch.ones(2), torch.full((2,), 2.0))),))
    assert [c.tolist() for c in local.values] == [[-1.0, -1.0], [-2.0, -2.0]]
    strategy.run(lambda: None)
    assert [c.tolist() for c in first.values] == [[-1.0, -1.0], [-1.0, -1.0]]
