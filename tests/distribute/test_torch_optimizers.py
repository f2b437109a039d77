"""A user's ``torch.optim`` optimizer over distributed variables is never altered: each replica steps
a twin of it (``optimizer_hooks``), and the user's object keeps torch's own containers and state."""

import collections

import pytest
import torch

import multidev as md
from multidev.distribute.replica_update import local_copy
from multidev.distribute.optimizer_hooks import replica_optimizer

PR = md.distribute.PerReplica
TWO_CPUS = ["/cpu:0", "/cpu:1"]


class MySGD(torch.optim.SGD):  # a subclass keeps the all-reduce path: every replica keeps its own state
    pass


STRATEGIES = {
    "split_update": (lambda: md.distribute.MirroredStrategy(TWO_CPUS), torch.optim.SGD),
    "all_reduce": (lambda: md.distribute.MirroredStrategy(TWO_CPUS), MySGD),
    "shared_storage": (lambda: md.distribute.experimental.CentralStorageStrategy(TWO_CPUS), torch.optim.SGD),
}


def _setup(name):
    make_strategy, cls = STRATEGIES[name]
    strategy = make_strategy()
    torch.manual_seed(0)
    with strategy.scope():
        layer = torch.nn.Linear(3, 2)
        opt = cls(layer.parameters(), lr=0.1, momentum=0.9)
    return strategy, layer, opt


def _step_fn(layer, opt):
    def step(x):
        opt.zero_grad()
        layer(x).pow(2).sum(1).mean().backward()   # a mean loss: averaged across replicas, as DDP does
        opt.step()
    return step


def _batch():
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3) / 10
    return x, PR((x[:2], x[2:]))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_users_optimizer_keeps_torchs_containers(name):
    strategy, layer, opt = _setup(name)
    groups, state, attributes = opt.param_groups, opt.state, set(vars(opt))
    group_dicts = list(groups)
    seen = []

    def step(x):
        seen.append(opt.param_groups[0]["params"][0])
        _step_fn(layer, opt)(x)

    strategy.run(step, args=(_batch()[1],))
    assert opt.param_groups is groups and type(groups) is list
    # the same group objects; dicts whose numbers written in a replica are its own (replica_hyperparameters)
    assert all(a is b and isinstance(a, dict) for a, b in zip(opt.param_groups, group_dicts))
    assert all(type(g) is dict for g in opt.state_dict()["param_groups"])
    # torch's defaultdict, whose entries in a replica are that replica's (replica_state)
    assert opt.state is state and isinstance(state, collections.defaultdict)
    assert set(vars(opt)) == attributes, "no attribute added to the user's optimizer"
    assert all(p is layer.weight for p in seen), "inside strategy.run the user sees their own variables"
    assert set(opt.state) == {layer.weight, layer.bias}, "state keyed by the variables, as torch keys it"
    for r in range(2):
        twin = replica_optimizer(opt, r)
        assert type(twin) is type(opt) and twin is not opt
        assert twin.param_groups[0]["params"][0] is local_copy(layer.weight, r), "a replica steps its own leaf tensors"


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_training_equals_one_device_and_state_dict_is_torchs(name):
    strategy, layer, opt = _setup(name)
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, parts = _batch()
    for _ in range(3):
        strategy.run(_step_fn(layer, opt), args=(parts,))
        _step_fn(ref, ref_opt)(x)
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-6, atol=1e-6)
    saved, want = opt.state_dict(), ref_opt.state_dict()
    assert saved["param_groups"] == want["param_groups"]
    for i, entry in want["state"].items():
        torch.testing.assert_close(saved["state"][i]["momentum_buffer"], entry["momentum_buffer"],
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_state_written_in_cross_replica_context_reaches_every_replica(name):
    strategy, layer, opt = _setup(name)
    x, parts = _batch()
    strategy.run(_step_fn(layer, opt), args=(parts,))
    opt.state[layer.weight] = {"momentum_buffer": torch.full((2, 3), 5.0)}   # one entry replaced
    del opt.state[layer.bias]                                                  # one removed
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    ref.load_state_dict({k: v.detach() for k, v in layer.state_dict().items()})
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    ref_opt.state[ref.weight] = {"momentum_buffer": torch.full((2, 3), 5.0)}
    strategy.run(_step_fn(layer, opt), args=(parts,))
    _step_fn(ref, ref_opt)(x)
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-6, atol=1e-6)


WRITES_IN_AN_ENTRY = {   # the user's write between runs, in an entry that stays the same dict
    "zero_": lambda entry: entry["momentum_buffer"].zero_(),                      # a restart's momentum reset
    "mul_": lambda entry: entry["momentum_buffer"].mul_(0.5),
    "new_tensor": lambda entry: entry.__setitem__("momentum_buffer", torch.full_like(entry["momentum_buffer"], 5.0)),
    "new_key": lambda entry: entry.__setitem__("seen", 1),
}


@pytest.mark.parametrize("write", list(WRITES_IN_AN_ENTRY))
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_state_written_inside_an_entry_reaches_every_replica(name, write):
    """``for s in opt.state.values(): s["momentum_buffer"].zero_()`` between epochs keeps each entry (the
    same dict): replicas with their own copies of the state must see the write too, or they drift apart."""
    strategy, layer, opt = _setup(name)
    x, parts = _batch()
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        strategy.run(_step_fn(layer, opt), args=(parts,))
        _step_fn(ref, ref_opt)(x)
        for entry in (*opt.state.values(), *ref_opt.state.values()):
            WRITES_IN_AN_ENTRY[write](entry)
    strategy.run(_step_fn(layer, opt), args=(parts,))
    _step_fn(ref, ref_opt)(x)
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-6, atol=1e-6)


def test_replicas_with_own_state_keep_it_apart_from_the_users():
    strategy, layer, opt = _setup("all_reduce")
    strategy.run(_step_fn(layer, opt), args=(_batch()[1],))
    mine, theirs = (replica_optimizer(opt, r).state[layer.weight.values[r]]["momentum_buffer"] for r in range(2))
    assert mine is opt.state[layer.weight]["momentum_buffer"], "replica 0's state is the user's"
    assert theirs is not mine and torch.equal(theirs, mine), "replica 1 keeps an equal copy of its own"


@pytest.mark.parametrize("name", ["split_update", "all_reduce"])
def test_hyperparameters_written_by_the_user_reach_every_replica(name):
    strategy, layer, opt = _setup(name)
    x, parts = _batch()
    before = [layer.weight.detach().clone()] * 2   # every replica starts from the primary
    opt.param_groups[0]["lr"] = 0.0
    opt.param_groups[0]["momentum"] = 0.0
    strategy.run(_step_fn(layer, opt), args=(parts,))
    assert all(torch.equal(a, b) for a, b in zip(before, layer.weight.values))
    assert [replica_optimizer(opt, r).param_groups[0]["lr"] for r in range(2)] == [0.0, 0.0]


def test_users_step_hooks_see_the_users_optimizer():
    strategy, layer, opt = _setup("split_update")
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", o is opt)))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", o is opt)))
    strategy.run(_step_fn(layer, opt), args=(_batch()[1],))
    assert sorted(calls) == [("post", True)] * 2 + [("pre", True)] * 2


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_step_with_a_closure_trains_as_one_device(name):
    """``opt.step(closure)``: the closure's ``loss.backward()`` reduces the gradients before they are
    applied (multidev evaluates it once, before the step), on every update path; the step returns the
    global batch's loss. (It was refused before LBFGS was supported: see tests/programs/idioms.py.)"""
    strategy, layer, opt = _setup(name)
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, parts = _batch()

    def closure_step(model, optimizer, xb):
        def closure():
            optimizer.zero_grad()
            loss = model(xb).pow(2).sum(1).mean()
            loss.backward()
            return loss
        return optimizer.step(closure)

    for _ in range(2):
        expected = closure_step(ref, ref_opt, x)
        losses = strategy.run(closure_step, args=(layer, opt, parts))
        assert [float(v) for v in strategy.experimental_local_results(losses)] == pytest.approx([float(expected.detach())] * 2)
    for got, want in ((layer.weight, ref.weight), (layer.bias, ref.bias)):
        for copy in got.values:
            torch.testing.assert_close(copy, want, rtol=1e-6, atol=1e-7)


def test_lr_scheduler_and_load_state_dict_keep_working():
    strategy, layer, opt = _setup("all_reduce")
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x, parts = _batch()
    strategy.run(_step_fn(layer, opt), args=(parts,))
    scheduler.step()
    saved = opt.state_dict()
    strategy.run(_step_fn(layer, opt), args=(parts,))
    assert [replica_optimizer(opt, r).param_groups[0]["lr"] for r in range(2)] == [0.05, 0.05]
    opt.load_state_dict(saved)   # torch makes new groups and state: every replica's twin follows
    assert opt.param_groups[0]["lr"] == 0.05
    for r in range(2):
        twin = replica_optimizer(opt, r)
        torch.testing.assert_close(twin.state[layer.weight.values[r]]["momentum_buffer"],
                                   saved["state"][0]["momentum_buffer"], rtol=0, atol=0)


def test_an_optimizer_whose_hook_refers_to_it_is_still_freed():
    import gc
    import weakref

    strategy, layer, opt = _setup("all_reduce")
    opt.register_step_post_hook(lambda o, args, kwargs, keep=opt: None)   # the hook holds the optimizer
    strategy.run(_step_fn(layer, opt), args=(_batch()[1],))
    ref = weakref.ref(opt)
    del opt
    gc.collect()
    assert ref() is None, "multidev keeps no strong reference to a user's optimizer"


class CountingAdamW(torch.optim.AdamW):  # a user's subclass whose step calls torch's (itself hooked)
    steps = 0

    def step(self, closure=None):
        type(self).steps += 1
        return super().step(closure)


def test_a_subclass_calling_the_hooked_parent_step_trains_as_one_device():
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])   # AdamW.step itself gets torch's hook wrapper
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    torch.manual_seed(0)
    with strategy.scope():
        layer = torch.nn.Linear(3, 2)
        opt = CountingAdamW(layer.parameters(), lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(o is opt))
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    x, parts = _batch()
    for _ in range(2):
        strategy.run(_step_fn(layer, opt), args=(parts,))
        _step_fn(ref, ref_opt)(x)
    assert CountingAdamW.steps == 4 and calls == [True] * 4, "the user's step and hooks: once per replica and step"
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-5, atol=1e-6)
