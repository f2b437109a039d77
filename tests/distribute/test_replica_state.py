"""``optimizer.state`` inside ``strategy.run`` is the calling replica's (``distribute/replica_state.py``): a step
that writes optimizer state (moments scaled, an entry dropped) trains as one device (each DDP rank writes its
own state once), on each of the update plans."""

import collections
import copy
import pickle

import pytest
import torch

import multidev as md
from tests.distribute.test_torch_optimizers import STRATEGIES, _batch, _setup


def _reference():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    return layer, torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)


def _train(layer, opt, write, run=None, steps=3):
    """``steps`` steps of a mean loss, ``write(opt, layer)`` after each ``opt.step()``; what the step read back."""
    def step(x):
        opt.zero_grad()
        layer(x).pow(2).sum(1).mean().backward()
        opt.step()
        return write(opt, layer)
    x, parts = _batch()
    return [run(step, parts) if run else step(x) for _ in range(steps)]


def _halve(opt, layer):
    for entry in opt.state.values():
        entry["momentum_buffer"].mul_(0.5)
    return torch.tensor(float(sum(e["momentum_buffer"].sum() for e in opt.state.values())))


def _drop_weight(opt, layer):
    opt.state[layer.weight] = {}       # the weight's momentum starts over
    had_bias = layer.bias in opt.state
    del opt.state[layer.bias]
    return torch.tensor([float(len(opt.state)), float(had_bias), float(layer.bias in opt.state)])


def _same_as_reference(strategy, layer, opt, write):
    ref, ref_opt = _reference()
    run = lambda fn, parts: strategy.experimental_local_results(strategy.run(fn, args=(parts,)))   # noqa: E731
    got = _train(layer, opt, write, run)
    want = _train(ref, ref_opt, write)
    for per_replica, value in zip(got, want):   # every replica read what the one device read
        for v in per_replica:
            torch.testing.assert_close(v, value, rtol=1e-6, atol=1e-6)
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_state_scaled_in_the_step_once_per_replica(name):
    """``momentum_buffer.mul_(0.5)`` after each step: every replica halves its own momentum once (it was halved
    once per replica on a shared one, or on replica 0's alone where replicas keep copies)."""
    _same_as_reference(*_setup(name), _halve)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_entries_replaced_and_deleted_in_the_step(name):
    _same_as_reference(*_setup(name), _drop_weight)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_outside_runs_the_state_is_the_users_and_pickles_as_torchs(name):
    strategy, layer, opt = _setup(name)
    state = opt.state
    _train(layer, opt, _halve, lambda fn, parts: strategy.run(fn, args=(parts,)), steps=2)
    assert opt.state is state and isinstance(state, collections.defaultdict), "one object across runs"
    assert set(state) == {layer.weight, layer.bias}
    restored = pickle.loads(pickle.dumps(state))
    assert type(restored) is collections.defaultdict and len(restored) == 2
    assert type(copy.deepcopy(state)) is collections.defaultdict and len(copy.deepcopy(state)) == 2
    saved = opt.state_dict()
    assert type(saved["state"]) is dict and set(saved["state"]) == {0, 1}


def test_a_state_the_user_assigns_is_each_replicas_from_the_next_run():
    """``opt.state = defaultdict(dict)`` between runs (a plain dict again), then a scaling in the step."""
    strategy, layer, opt = _setup("all_reduce")
    ref, ref_opt = _reference()
    run = lambda fn, parts: strategy.run(fn, args=(parts,))   # noqa: E731
    _train(layer, opt, lambda o, m: None, run, steps=1)
    _train(ref, ref_opt, lambda o, m: None, steps=1)
    opt.state, ref_opt.state = collections.defaultdict(dict), collections.defaultdict(dict)
    _train(layer, opt, _halve, run, steps=2)
    _train(ref, ref_opt, _halve, steps=2)
    for p, e in zip(layer.parameters(), ref.parameters()):
        for component in p.values:
            torch.testing.assert_close(component.detach(), e.detach(), rtol=1e-6, atol=1e-6)


def test_one_replica_sees_the_users_dict():
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        layer = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    x, _ = _batch()
    _train(layer, opt, _halve, lambda fn, parts: strategy.run(fn, args=(x,)), steps=2)
    assert all(e["momentum_buffer"] is dict.get(opt.state, p)["momentum_buffer"] for p, e in opt.state.items())
