"""A PyTorch program ported with two lines (``strategy.scope()``, ``strategy.run``) gives DDP's result
(issue 23): gradients are reduced when ``loss.backward()`` returns (averaged for torch's mean
losses, summed after ``md.nn.compute_average_loss``), schedulers step once per step, frozen layers
stay frozen on every replica, a module built outside the scope is refused, and torch's module
transforms work or say why not. Float64, so one device is matched to rounding."""

import contextlib

import pytest
import torch

import multidev as md

PR = md.distribute.PerReplica
TWO_CPUS = ["/cpu:0", "/cpu:1"]
F64 = torch.float64


def _strategy():
    return md.distribute.MirroredStrategy(TWO_CPUS)


def _data(steps=3, batch=8, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, features, generator=g, dtype=F64), torch.randn(batch, 1, generator=g, dtype=F64))
            for _ in range(steps)]


def _halves(t):
    return PR(tuple(torch.tensor_split(t, 2)))


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 1)).to(F64)


def _train(strategy, step_body, make_opt=lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), steps=3):
    """Train ``_mlp`` with ``step_body(model, opt, x, y) -> value``; returns (model, values per step)."""
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = _mlp()
        opt = make_opt(model.parameters())
    values = []
    for x, y in _data(steps):
        if strategy is None:
            values.append(step_body(model, opt, x, y))
        else:
            out = strategy.run(lambda a, b: step_body(model, opt, a, b), args=(_halves(x), _halves(y)))
            values.append(strategy.experimental_local_results(out))
    return model, values


def _assert_same_weights(model, reference):
    for p, q in zip(model.parameters(), reference.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), q.detach(), rtol=0, atol=1e-13)


def _mse_step(model, opt, x, y, loss_fn=torch.nn.functional.mse_loss):
    opt.zero_grad()
    loss = loss_fn(model(x), y)   # torch's mse_loss is a mean, as every torch loss is
    loss.backward()
    opt.step()
    return loss.detach()


# --- item 1: mean losses average, compute_average_loss sums ---------------------------------------------
def test_mean_loss_with_backward_equals_one_device():
    model, _ = _train(_strategy(), _mse_step)
    reference, _ = _train(None, _mse_step)
    _assert_same_weights(model, reference)


def test_compute_average_loss_keeps_tensorflows_sum():
    def step(model, opt, x, y):
        return _mse_step(model, opt, x, y,
                         lambda out, target: md.nn.compute_average_loss(((out - target) ** 2).mean(1), global_batch_size=8))

    model, _ = _train(_strategy(), step)
    reference, _ = _train(None, step)
    _assert_same_weights(model, reference)


# --- items 2 and 3: p.grad after backward is the reduced gradient --------------------------------------
def test_clip_grad_norm_sees_the_global_gradient():
    def step(model, opt, x, y):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        opt.step()
        return norm

    model, norms = _train(_strategy(), step, lambda p: torch.optim.Adam(p, lr=0.01))
    reference, want = _train(None, step, lambda p: torch.optim.Adam(p, lr=0.01))
    _assert_same_weights(model, reference)
    for per_replica, norm in zip(norms, want):
        assert all(float(n) == pytest.approx(float(norm), rel=1e-13) for n in per_replica)


def test_manual_update_from_p_grad_equals_one_device():
    def step(model, opt, x, y):
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)   # word_language_model's update

    model, _ = _train(_strategy(), step)
    reference, _ = _train(None, step)
    _assert_same_weights(model, reference)


def test_p_grad_inside_and_after_run_and_accumulation():
    strategy = _strategy()
    with strategy.scope():
        model = _mlp()
    reference = _mlp()
    x, y = _data(1)[0]

    def step(a, b):
        model.zero_grad()
        for part in torch.tensor_split(torch.arange(len(a)), 2):   # two backward passes accumulate
            (torch.nn.functional.mse_loss(model(a[part]), b[part]) / 2).backward()
        return [p.grad.clone() for p in model.parameters()]

    inside = strategy.experimental_local_results(strategy.run(step, args=(_halves(x), _halves(y))))
    for part in torch.tensor_split(torch.arange(8), 4):
        (torch.nn.functional.mse_loss(reference(x[part]), y[part]) / 4).backward()
    for r in range(2):
        for got, q in zip(inside[r], reference.parameters()):
            torch.testing.assert_close(got, q.grad, rtol=0, atol=1e-14)
    for p, q in zip(model.parameters(), reference.parameters()):   # cross-replica: replica 0's, never None
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-14)


def test_summed_gradients_accumulate_only_the_new_part():
    strategy = _strategy()
    with strategy.scope():
        w = torch.nn.Linear(1, 1, bias=False).to(F64)

    def step(x):
        w.zero_grad()
        for _ in range(2):
            md.nn.compute_average_loss(w(x).sum(1), global_batch_size=1).backward()
        return w.weight.grad.clone()

    got = strategy.experimental_local_results(strategy.run(step, args=(PR((torch.ones(1, 1, dtype=F64),
                                                                              torch.full((1, 1), 2.0, dtype=F64))),)))
    assert [g.item() for g in got] == [6.0, 6.0]   # (1 + 2) summed, twice


def test_tape_and_apply_gradients_keep_the_sum():
    """TensorFlow-style loops (md.GradientTape + md.keras apply_gradients) never touch .grad: summed."""
    strategy = _strategy()
    with strategy.scope():
        v = md.Variable([1.0, 1.0])
        opt = md.keras.optimizers.SGD(learning_rate=0.1)

    def step(x):
        with md.GradientTape() as tape:
            loss = (v * x).sum()
        opt.apply_gradients([(tape.gradient(loss, v), v)])

    strategy.run(step, args=(PR((torch.ones(2), torch.full((2,), 2.0))),))
    assert [c.tolist() for c in v.values] == [pytest.approx([0.7, 0.7])] * 2


# --- item 4: schedulers step once per step ---------------------------------------------------------
def test_linear_schedule_inside_the_step_advances_once_per_step():
    def linear_warmup(step, warmup=2, total=6):   # Hugging Face's get_linear_schedule_with_warmup
        return step / warmup if step < warmup else max(0.0, (total - step) / (total - warmup))

    strategy = _strategy()
    with strategy.scope():
        model = _mlp()
        opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup)
    seen = []

    def step(x, y):
        _mse_step(model, opt, x, y)
        scheduler.step()
        return opt.param_groups[0]["lr"]

    for x, y in _data(4):
        seen.append(strategy.experimental_local_results(strategy.run(step, args=(_halves(x), _halves(y)))))
    assert all(len(set(s)) == 1 for s in seen), "every replica read the same rate"
    assert [s[0] for s in seen] == pytest.approx([2.5e-4, 5e-4, 3.75e-4, 2.5e-4])
    assert scheduler.last_epoch == 4


# --- item 6: frozen layers -----------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["requires_grad_", "attribute"])
def test_freezing_after_the_scope_reaches_every_replica(how):
    strategy = _strategy()
    with strategy.scope():
        model = _mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    if how == "requires_grad_":
        model[0].requires_grad_(False)
    else:
        for p in model[0].parameters():
            p.requires_grad = False
    frozen = [p.detach().clone() for p in model[0].parameters()]
    for x, y in _data(2):
        strategy.run(lambda a, b: _mse_step(model, opt, a, b), args=(_halves(x), _halves(y)))
    for p, before in zip(model[0].parameters(), frozen):
        assert all(torch.equal(c, before) for c in p.values), "a frozen layer never moves"
    assert not torch.equal(model[2].weight.values[1], _mlp()[2].weight), "the rest trains"


# --- item 7: a module built outside the scope ---------------------------------------------------------
def test_module_built_outside_the_scope_is_refused_before_any_update():
    strategy = _strategy()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    x, y = _data(1)[0]
    with pytest.raises(ValueError, match=r"Sequential|Linear.*outside MirroredStrategy.scope\(\).*strategy.scope"):
        strategy.run(lambda a, b: _mse_step(model, opt, a, b), args=(_halves(x), _halves(y)))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))



def test_a_parameter_replaced_after_the_scope_is_named_as_assigned_there():
    """``model[2].weight = nn.Parameter(pretrained)`` after the scope: the Linear was built in the scope, so the
    error names the assignment (and the in-place copy that keeps the mirrored parameter), not the Linear."""
    strategy = _strategy()
    with strategy.scope():
        model = _mlp()
    last = [m for m in model if isinstance(m, torch.nn.Linear)][-1]
    last.weight = torch.nn.Parameter(torch.zeros_like(last.weight))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _data(1)[0]
    with pytest.raises(ValueError, match=r"Linear's parameters \['weight'\] were assigned outside MirroredStrategy"
                                         r".scope\(\) \(its \['bias'\] were made in it.*weight.copy_\(value\)"):
        strategy.run(lambda a, b: _mse_step(model, opt, a, b), args=(_halves(x), _halves(y)))

# --- item 9: conversions, parametrizations, shapes, batch dimension -----------------------------------
def test_double_after_the_scope_converts_every_replica():
    strategy = _strategy()
    with strategy.scope():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.BatchNorm1d(3))
    model.double()
    assert all(c.dtype == F64 for p in model.parameters() for c in p.values)
    assert all(c.dtype == F64 for c in model[1].running_mean.values)
    x = _data(1)[0][0]
    out = strategy.experimental_local_results(strategy.run(lambda a: model(a), args=(_halves(x),)))
    assert all(o.dtype == F64 for o in out)


@pytest.mark.parametrize("weight_norm", [torch.nn.utils.parametrizations.weight_norm, torch.nn.utils.weight_norm],
                         ids=["parametrized", "deprecated"])
def test_weight_norm_in_the_scope_equals_one_device(weight_norm):
    """The deprecated one's forward pre-hook writes ``module.weight``: kept per replica (``replica_attributes``)."""
    def build():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 1)).to(F64)
        weight_norm(net[0])
        return net

    strategy = _strategy()
    with strategy.scope():
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = build()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x, y in _data(2):
        strategy.run(lambda a, b: _mse_step(model, opt, a, b), args=(_halves(x), _halves(y)))
        _mse_step(reference, ref_opt, x, y)
    _assert_same_weights(model, reference)


def test_returning_a_shape_from_the_step():
    strategy = _strategy()
    x = torch.zeros(4, 3)
    shapes = strategy.experimental_local_results(strategy.run(lambda a: a.shape, args=(_halves(x),)))
    assert set(shapes) == {torch.Size([2, 3])}
    uneven = strategy.run(lambda a: a.shape, args=(PR((x[:3], x[3:])),))
    assert strategy.experimental_local_results(uneven) == (torch.Size([3, 3]), torch.Size([1, 3]))


def test_batch_dimension_is_zero_and_disagreeing_sizes_say_so():
    strategy = _strategy()
    tokens = torch.zeros(6, 4, dtype=torch.long)      # sequence-first: [sequence, batch]
    targets = torch.zeros(24, dtype=torch.long)       # flattened, as word_language_model's get_batch
    dataset = md.data.Dataset.from_tensors((tokens, targets))
    with pytest.raises(ValueError, match=r"dimension 0.*batch-first"):
        next(iter(strategy.experimental_distribute_dataset(dataset)))


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.1), lambda p: torch.optim.Adamax(p, lr=0.1)],
                         ids=["sgd", "adamax"])
def test_p_grad_after_the_step_is_the_reduced_gradient_on_every_replica(make_opt):
    """A split update releases the gradients of variables another replica owns during the step,
    and gives them back: after the step every replica's p.grad is the reduced gradient, as DDP's."""
    def step(model, opt, x, y):
        _mse_step(model, opt, x, y)
        return [p.grad.clone() for p in model.parameters()]

    _, grads = _train(_strategy(), step, make_opt, steps=1)
    _, want = _train(None, step, make_opt, steps=1)
    for replica_grads in grads[0]:
        for got, expected in zip(replica_grads, want[0]):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-14)


# --- a leaf some replicas' backward reached and others' did not (DDP's unused parameter) -------------
def test_a_head_only_one_replica_uses_gets_the_mean_with_zeros_as_ddp():
    """Replica 0's batch goes through head ``a``, replica 1's through head ``b``: each head's gradient is
    the mean over both replicas, counting zeros where a replica did not reach it (DDP with
    find_unused_parameters); accumulating a second backward (which reaches only the trunk) keeps it."""
    strategy = _strategy()
    with strategy.scope():
        torch.manual_seed(0)
        trunk, a, b = (torch.nn.Linear(5, 5).to(F64), torch.nn.Linear(5, 1).to(F64), torch.nn.Linear(5, 1).to(F64))
    x = _data(1)[0][0]

    def step(part):
        head = a if int(md.distribute.get_replica_context().replica_id_in_sync_group) == 0 else b
        head(trunk(part)).pow(2).mean().backward()
        trunk(part).sum().backward()        # accumulate: reaches the trunk only
        return [p.grad.clone() for p in (*trunk.parameters(), *a.parameters(), *b.parameters())]

    got = strategy.experimental_local_results(strategy.run(step, args=(_halves(x),)))
    torch.manual_seed(0)
    ref = (torch.nn.Linear(5, 5).to(F64), torch.nn.Linear(5, 1).to(F64), torch.nn.Linear(5, 1).to(F64))
    per_replica = []
    for head, part in zip(ref[1:], torch.tensor_split(x, 2)):
        for m in ref:
            m.zero_grad()
        head(ref[0](part)).pow(2).mean().backward()
        ref[0](part).sum().backward()
        per_replica.append([torch.zeros_like(p) if p.grad is None else p.grad.clone()
                            for m in ref for p in m.parameters()])
    expected = [(g0 + g1) / 2 for g0, g1 in zip(*per_replica)]
    for replica in got:
        for g, e in zip(replica, expected):
            torch.testing.assert_close(g, e, rtol=0, atol=1e-13)


def test_a_gradient_only_computed_after_backward_leaves_the_reduced_grad_alone():
    """``torch.autograd.grad`` after ``loss.backward()`` (a gradient penalty, a logged norm) computes and
    accumulates nothing: each ``.grad`` stays the reduced one, under a mean loss and a scaled sum alike."""
    strategy = _strategy()
    with strategy.scope():
        model = _mlp()
    x, y = _data(1)[0]

    def step(a, b, scaled):
        loss = torch.nn.functional.mse_loss(model(a), b, reduction="none").mean(dim=1)
        loss = md.nn.compute_average_loss(loss, global_batch_size=8) if scaled else loss.mean()
        loss.backward()
        reduced = [p.grad.clone() for p in model.parameters()]
        torch.autograd.grad(model(a).sum(), list(model.parameters()))
        return [torch.equal(p.grad, g) for p, g in zip(model.parameters(), reduced)], reduced

    for scaled in (False, True):
        model.zero_grad()
        out = strategy.experimental_local_results(strategy.run(step, args=(_halves(x), _halves(y), scaled)))
        assert all(all(same) for same, _ in out), f"scaled={scaled}: .grad changed by autograd.grad"
        for g0, g1 in zip(out[0][1], out[1][1]):
            assert torch.equal(g0, g1), "every replica holds the same reduced gradient"
