"""Logical CPU replicas split an element-wise optimizer's update: each parameter's owner sums its
gradients, updates it and copies it to the other replicas; the result equals one device."""

import contextlib
import threading

import pytest
import torch

import multidev as md
from multidev.distribute.replica_update import assign_owners

PR = md.distribute.PerReplica


def _model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _batches():
    g = torch.Generator().manual_seed(11)
    return [(torch.randn(6, 4, generator=g), torch.randn(6, 3, generator=g)) for _ in range(3)]


def _train_reference_in_replica_order(make_opt, n):
    """One device, summing each step's gradient slice by slice in replica order: the additions the
    split update makes. Float addition is commutative, so with two replicas the owner's ``g_own + g_other``
    is bit-identical to ``g0 + g1`` whoever owns the variable, and any difference left is the split's."""
    model = _model()
    opt = make_opt(model.parameters())
    for x, y in _batches():
        opt.zero_grad()
        for xs, ys in zip(torch.tensor_split(x, n), torch.tensor_split(y, n)):
            (((model(xs) - ys) ** 2).sum(1).sum() / 6).backward()
        opt.step()
    return model, opt


def _train_distributed(strategy, make_opt, spy=None):
    with strategy.scope():
        model = _model()
        opt = make_opt(model.parameters())
    if spy is not None:
        opt.register_step_pre_hook(spy)
    n = strategy.num_replicas_in_sync

    def step(x, y):
        opt.zero_grad()
        loss = md.nn.compute_average_loss(((model(x) - y) ** 2).sum(1), global_batch_size=6)
        loss.backward()
        opt.step()

    for x, y in _batches():
        strategy.run(step, args=(PR(tuple(torch.tensor_split(x, n))), PR(tuple(torch.tensor_split(y, n)))))
    return model, opt


@pytest.mark.parametrize("n", [2, 3])
def test_each_replica_updates_only_its_own_parameters(n):
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()

    def spy(optimizer, args, kwargs):  # runs after multidev's hook: what this replica's step updates
        rid = int(md.distribute.get_replica_context().replica_id_in_sync_group)   # a tensor, as in TF
        with_grad = [i for i, p in enumerate(optimizer.param_groups[0]["params"]) if p.grad is not None]
        with lock:
            seen.setdefault(rid, with_grad)

    strategy = md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)])
    _train_distributed(strategy, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), spy)
    assert sorted(seen) == list(range(n))
    updated = [i for r in range(n) for i in seen[r]]
    assert sorted(updated) == [0, 1, 2, 3], f"every parameter updated exactly once, got {seen}"


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5),
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    lambda p: torch.optim.Adam(p, lr=0.01, fused=True),
], ids=["sgd_nesterov", "adamw", "rmsprop", "sgd_foreach", "adam_fused"])
def test_split_update_matches_one_device_parameters_and_state(make_opt):
    """Bit-identical to one device that sums the same gradient slices in the same order.

    Against a one-device run on the whole batch the gradients differ by float reassociation (two
    half-batch GEMMs plus one addition vs one GEMM, a few ulps that depend on the CPU's kernels), and
    RMSprop's g / sqrt(v) turns a few ulps of a near-zero gradient into ~1e-6 of a parameter: no fixed
    tolerance holds on every CPU. Making the order of the sums identical removes the question; the
    whole-batch comparison lives in test_training_invariant.py with a tolerance derived there."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, opt = _train_distributed(strategy, make_opt)
    ref_model, ref_opt = _train_reference_in_replica_order(make_opt, 2)
    for p, e in zip(model.parameters(), ref_model.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=0, atol=0)
    state, ref_state = opt.state_dict()["state"], ref_opt.state_dict()["state"]
    assert set(state) == set(ref_state) == {0, 1, 2, 3}, "one state entry per parameter, whoever owns it"
    for i in ref_state:
        for slot, value in ref_state[i].items():
            torch.testing.assert_close(state[i][slot], value, rtol=0, atol=0)


def test_state_dict_round_trip_and_continued_training():
    make = lambda p: torch.optim.Adam(p, lr=0.01)  # noqa: E731
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, opt = _train_distributed(strategy, make)
    saved = opt.state_dict()
    with strategy.scope():
        fresh_opt = make(model.parameters())
    fresh_opt.load_state_dict(saved)

    def step():
        fresh_opt.zero_grad()
        model(torch.ones(1, 4)).sum().backward()
        fresh_opt.step()

    strategy.run(step)
    assert float(fresh_opt.state_dict()["state"][0]["step"]) == 4.0
    for p in model.parameters():
        assert torch.equal(p.values[0], p.values[1])


def test_optimizer_subclass_keeps_the_all_reduce_path():
    class MySGD(torch.optim.SGD):  # might override step() with a cross-parameter rule
        pass

    seen = []

    def spy(optimizer, args, kwargs):
        seen.append(sum(p.grad is not None for p in optimizer.param_groups[0]["params"]))

    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    model, _ = _train_distributed(strategy, lambda p: MySGD(p, lr=0.1, momentum=0.9), spy)
    ref_model, _ = _train_reference_in_replica_order(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 2)
    assert set(seen) == {4}, "every replica applies every (summed) gradient"
    for p, e in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.values[1].detach(), e.detach(), rtol=0, atol=0)


def test_owners_balance_bytes_and_plain_tensors_belong_to_replica_0():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        big, mid1, mid2, small = (md.Variable(torch.zeros(n)) for n in (100, 50, 45, 5))
    plain = torch.zeros(1000)
    owners = assign_owners([small, big, plain, mid1, mid2], 2)
    assert owners == [1, 0, 0, 1, 1]  # 100 | 50 + 45 + 5; the plain tensor is not split


class _SubclassSGD(torch.optim.SGD):  # takes the all-reduce path
    pass


@pytest.mark.parametrize("cls", [torch.optim.SGD, _SubclassSGD], ids=["split", "all_reduce"])
def test_param_group_added_mid_training_matches_one_device(cls):
    """``add_param_group`` between steps: the new group is zeroed by the next ``zero_grad`` on every
    replica, and momentum of the old groups carries over whichever replica reinstalls the views."""
    def train(strategy):
        torch.manual_seed(0)
        with strategy.scope() if strategy else contextlib.nullcontext():
            first, second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)
            opt = (cls if strategy else torch.optim.SGD)(first.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(4, 3)

        def step(xb):
            opt.zero_grad()
            (second(first(xb)).sum() / len(xb)).backward()   # a mean: averaged across replicas (DDP)
            opt.step()

        for i in range(3):
            if i == 1:
                opt.add_param_group({"params": list(second.parameters())})
            if strategy:
                strategy.run(step, args=(PR((x[:2], x[2:])),))
            else:
                step(x)
        return [p.detach().clone() for p in [*first.parameters(), *second.parameters()]]

    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for got, want in zip(train(strategy), train(None)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
