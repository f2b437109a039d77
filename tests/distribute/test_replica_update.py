"""The update engine (``distribute/replica_update``): one plan per (strategy, optimizer), which one each
gets, that gradients are summed exactly once on the Keras path (sum, clip, apply) and the torch path
(the step hooks), and that summed-or-not is a type the engine checks."""

import time

import pytest
import torch

import multidev as md
from multidev.distribute import replica_update
from multidev.distribute.replica_update import local_copy
from multidev.values.gradients import LocalGrads, SummedGrads
from multidev.distribute.optimizer_hooks import update_plan

PR = md.distribute.PerReplica
TWO_CPUS = ["/cpu:0", "/cpu:1"]


class MySGD(torch.optim.SGD):  # a subclass may change step(): never split, always all-reduced
    pass


class MyAdam(torch.optim.Adam):
    pass


def _mirrored():
    return md.distribute.MirroredStrategy(TWO_CPUS)


def _central():
    return md.distribute.experimental.CentralStorageStrategy(TWO_CPUS)


def _model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


@pytest.mark.parametrize("make_strategy, make_opt, expected", [
    (_mirrored, lambda p: torch.optim.SGD(p, lr=0.1), "SplitPlan"),
    (_mirrored, lambda p: MySGD(p, lr=0.1), "BucketPlan"),
    (_central, lambda p: torch.optim.SGD(p, lr=0.1), "SharedStoragePlan"),
    (lambda: md.distribute.MirroredStrategy(["/cpu:0"]), lambda p: torch.optim.SGD(p, lr=0.1), "UpdatePlan"),
    (lambda: md.distribute.OneDeviceStrategy("/cpu:0"), lambda p: MySGD(p, lr=0.1), "UpdatePlan"),
], ids=["mirrored_split", "mirrored_subclass", "central_storage", "one_replica", "one_device"])
def test_each_strategy_and_optimizer_gets_one_plan(make_strategy, make_opt, expected):
    strategy = make_strategy()
    with strategy.scope():
        opt = make_opt(_model().parameters())
    plan = update_plan(opt)
    assert type(plan).__name__ == expected
    assert update_plan(opt) is plan, "chosen once and cached"


def test_optimizer_over_plain_tensors_gets_the_identity():
    opt = torch.optim.SGD(_model().parameters(), lr=0.1)
    assert type(update_plan(opt)).__name__ == "UpdatePlan"
    assert update_plan(opt).sum_all(None, LocalGrads((torch.ones(2),))).tensors[0].tolist() == [1.0, 1.0]


def _keras_step(strategy, opt, w, use_minimize):
    def step():
        k = float(md.distribute.get_replica_context().replica_id_in_sync_group + 1)  # 1 and 2: sum 3
        if use_minimize:
            opt.minimize(lambda: w * k, [w])
        else:
            opt.apply_gradients([(torch.tensor(k), w)])

    strategy.run(step)


@pytest.mark.parametrize("make_strategy", [_mirrored, _central], ids=["split_update", "shared_storage"])
@pytest.mark.parametrize("use_minimize", [False, True], ids=["apply_gradients", "minimize"])
@pytest.mark.parametrize("clipnorm, expected", [(None, -3.0), (2.5, -2.5)], ids=["no_clip", "clipnorm"])
def test_keras_optimizer_sums_once_then_clips(make_strategy, use_minimize, clipnorm, expected):
    """Replica gradients 1 and 2: the update is their sum 3 (clipped to 2.5), never 6 (summed twice)
    nor 2.5 + 2.5 or 1 + 2 clipped apart (clipped before summing)."""
    strategy = make_strategy()
    with strategy.scope():
        w = md.Variable(0.0)
        opt = md.keras.optimizers.SGD(1.0, clipnorm=clipnorm)
    _keras_step(strategy, opt, w, use_minimize)
    assert float(w.numpy()) == pytest.approx(expected)
    for value in strategy.experimental_local_results(w):
        assert float(value.detach()) == pytest.approx(expected)
    assert int(opt.iterations) == 1


def _batches():
    g = torch.Generator().manual_seed(11)
    return [(torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)) for _ in range(3)]


def _loss(model, x, y):
    # Scaled by the global batch (TensorFlow's rule): gradients are summed across replicas.
    return md.nn.compute_average_loss(((model(x) - y) ** 2).sum(1), global_batch_size=6)


def _train(strategy, opt, model, batches, scheduler=None):
    def step(x, y):
        opt.zero_grad()
        _loss(model, x, y).backward()
        opt.step()

    for x, y in batches:
        strategy.run(step, args=(PR(tuple(torch.tensor_split(x, 2))), PR(tuple(torch.tensor_split(y, 2)))))
        if scheduler is not None:
            scheduler.step()  # cross-replica context: writes the user's param groups


def _train_reference(opt, model, batches, scheduler=None):
    """One device summing the two half-batch gradients in replica order (the replicas' additions)."""
    for x, y in batches:
        opt.zero_grad()
        for xs, ys in zip(torch.tensor_split(x, 2), torch.tensor_split(y, 2)):
            _loss(model, xs, ys).backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.Adam(p, lr=0.01), lambda p: MyAdam(p, lr=0.01)],
                         ids=["split_update", "all_reduce"])
def test_torch_state_dict_round_trip_on_two_replicas(make_opt):
    strategy = _mirrored()
    with strategy.scope():
        model = _model()
        opt = make_opt(model.parameters())
    _train(strategy, opt, model, _batches()[:2])
    ref_model = _model()
    ref_opt = make_opt(ref_model.parameters())
    _train_reference(ref_opt, ref_model, _batches()[:2])

    saved = opt.state_dict()
    assert set(saved["state"]) == {0, 1, 2, 3}, "keyed by parameter index, as torch's state_dict is"
    for i, entry in ref_opt.state_dict()["state"].items():
        for slot, value in entry.items():
            torch.testing.assert_close(saved["state"][i][slot], value, rtol=0, atol=0)
    with strategy.scope():
        fresh = make_opt(model.parameters())
    fresh.load_state_dict(saved)
    _train(strategy, fresh, model, _batches()[2:])
    _train_reference(ref_opt, ref_model, _batches()[2:])
    for p, e in zip(model.parameters(), ref_model.parameters()):
        for component in p.values:  # every replica's copy continued from the restored state
            torch.testing.assert_close(component.detach(), e.detach(), rtol=0, atol=0)
    assert float(fresh.state_dict()["state"][0]["step"]) == 3.0


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5),
                                      lambda p: MySGD(p, lr=0.1, momentum=0.5)],
                         ids=["split_update", "all_reduce"])
def test_lr_scheduler_reaches_every_replica(make_opt):
    strategy = _mirrored()
    with strategy.scope():
        model = _model()
        opt = make_opt(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    _train(strategy, opt, model, _batches(), scheduler)
    ref_model = _model()
    ref_opt = make_opt(ref_model.parameters())
    _train_reference(ref_opt, ref_model, _batches(), torch.optim.lr_scheduler.StepLR(ref_opt, step_size=1, gamma=0.1))
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-4)
    for p, e in zip(model.parameters(), ref_model.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=0, atol=0)


# --- the engine's contract: types, ordering, in-place sums --------------------------------------------

def _split_plan(strategy):
    with strategy.scope():
        a = md.Variable(torch.zeros(4, dtype=torch.float64))
        b = md.Variable(torch.zeros(3, dtype=torch.float64))
    plan = replica_update.choose([a, b], strategy, elementwise=True)
    return plan, (a, b)


@pytest.mark.parametrize("make_plan", [lambda: replica_update.IDENTITY, lambda: _split_plan(_mirrored())[0],
                                       lambda: replica_update.choose(_split_plan(_central())[1], _central(),
                                                                     elementwise=False)],
                         ids=["identity", "split", "shared_storage"])
def test_apply_refuses_local_gradients_and_apply_own_refuses_summed(make_plan):
    plan = make_plan()
    applied = []
    with pytest.raises(TypeError, match="apply takes SummedGrads, got LocalGrads"):
        plan.apply(0, LocalGrads((torch.ones(4),)), applied.append)
    with pytest.raises(TypeError, match="apply_own takes LocalGrads, got SummedGrads"):
        plan.apply_own(0, SummedGrads((torch.ones(4),)), applied.append)
    with pytest.raises(TypeError, match="sum_all takes LocalGrads, got SummedGrads"):
        plan.sum_all(0, SummedGrads((torch.ones(4),)))
    assert applied == [], "nothing was applied"


def test_each_front_end_gets_its_plan_for_each_strategy():
    for make_strategy, expected in ((_mirrored, "SplitPlan"), (_central, "SharedStoragePlan"),
                                    (lambda: md.distribute.OneDeviceStrategy("/cpu:0"), "UpdatePlan")):
        strategy = make_strategy()
        with strategy.scope():
            w = md.Variable(torch.zeros(3))
            opt = md.keras.optimizers.Adam(0.1)
        assert type(opt._update_plan([w])).__name__ == expected, expected
        assert opt._update_plan([w]) is opt._update_plan([w]), "chosen once and cached"
    strategy = _mirrored()
    _, variables = _split_plan(strategy)
    assert type(replica_update.choose(variables, strategy, elementwise=False)).__name__ == "BucketPlan"


def test_summed_gradients_meet_before_an_owner_writes_another_replicas_copy():
    """SummedGrads need no exchange, so nothing else makes the replicas meet: replica 1 arrives late, and
    replica 0 (an owner) must not have written replica 1's copies while replica 1 could still read them."""
    strategy = _mirrored()
    plan, variables = _split_plan(strategy)
    assert type(plan).__name__ == "SplitPlan" and sorted(set(plan.owners)) == [0, 1]
    seen = {}

    def step():
        r = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        if r == 1:
            time.sleep(0.3)   # replica 0 reaches the step first and would publish now
        seen[r] = [local_copy(v, r).detach().clone() for v in variables]   # read just before the step

        def rule(tensors):
            with torch.no_grad():
                for v, g in zip(variables, tensors):
                    if g is not None:
                        local_copy(v, r).sub_(g)

        plan.step(r, SummedGrads(tuple(torch.ones_like(v, dtype=torch.float64) for v in variables)), rule)

    strategy.run(step)
    for r in (0, 1):
        assert all(float(t.abs().max()) == 0.0 for t in seen[r]), f"replica {r} read a copy written before its step"
    for v in variables:
        for component in v.values:
            assert component.detach().tolist() == [-1.0] * v.numel(), "every copy updated once, by its owner"


def test_split_sums_in_place_only_into_the_copies_own_grad():
    """In place (as DDP, no allocation a step) only where a gradient is the replica copy's own ``.grad``;
    a tensor the caller made (md.keras's apply_gradients) is summed into a new one and left as it was."""
    strategy = _mirrored()
    plan, (a, b) = _split_plan(strategy)
    kept, applied = {}, {}

    def step():
        r = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        own = local_copy(a, r)
        own.grad = torch.full((4,), float(r + 1), dtype=torch.float64)
        callers = torch.full((3,), float(r + 1), dtype=torch.float64)
        plan.step(r, LocalGrads((own.grad, callers)), lambda tensors: applied.__setitem__(r, tensors))
        kept[r] = (own.grad, callers)

    strategy.run(step)
    owner_a, owner_b = plan.owners
    assert owner_a != owner_b
    assert kept[owner_a][0].tolist() == [3.0] * 4 and applied[owner_a][0] is kept[owner_a][0], "summed in place"
    assert kept[owner_b][0].tolist() == [float(owner_b + 1)] * 4, "a replica's own gradient it does not apply"
    assert applied[owner_b][1].tolist() == [3.0] * 3 and applied[owner_a][1] is None
    assert [kept[r][1].tolist() for r in (0, 1)] == [[1.0] * 3, [2.0] * 3], "the caller's tensors unchanged"

    with strategy.scope():
        w = md.Variable(torch.zeros(2, dtype=torch.float64))
        opt = md.keras.optimizers.SGD(1.0)
    given = {}

    def keras_step():
        r = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        given[r] = torch.full((2,), float(r + 1), dtype=torch.float64)
        opt.apply_gradients([(given[r], w)])

    strategy.run(keras_step)
    assert type(opt._update_plan([w])).__name__ == "SplitPlan"
    assert given[0].tolist() == [1.0, 1.0] and given[1].tolist() == [2.0, 2.0], "the caller's gradients unchanged"
    assert [c.detach().tolist() for c in w.values] == [[-3.0, -3.0]] * 2
