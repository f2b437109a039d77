"""A step function's calls on the user's optimizer object inside ``strategy.run`` act as on each DDP
rank's own optimizer: ``add_param_group`` and ``load_state_dict`` once per step (not once per
replica), ``state_dict()`` the calling replica's own state (never another replica's mid-update).
Whole-training equivalence with one device and DDP: ``tests/programs/test_optimizer_matrix.py``."""

import copy
import time

import torch

import multidev as md
from multidev.distribute.optimizer_hooks import replica_optimizer

PR = md.distribute.PerReplica
TWO_CPUS = ["/cpu:0", "/cpu:1"]


class MySGD(torch.optim.SGD):   # a subclass: not split, so every replica updates its own copies and state
    pass


def _batch():
    x = torch.arange(12, dtype=torch.float64).reshape(4, 3) / 10
    return x, PR((x[:2], x[2:]))


def _build(cls=MySGD, **kw):
    strategy = md.distribute.MirroredStrategy(TWO_CPUS)
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)).double()
        opt = cls(model[0].parameters(), lr=0.1, momentum=0.9, **kw)
    return strategy, model, opt


def _update(model, opt, x):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def test_state_dict_in_the_step_is_the_calling_replicas_own():
    """Replica 0 is held back after the gradients are summed; replica 1 packs its state_dict at once:
    it sees its own step done (before, the user's state was replica 0's, still empty)."""
    strategy, model, opt = _build()
    held = []

    def hold_replica_0(o, args, kwargs):   # runs after multidev summed the gradients, before the update
        if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
            time.sleep(0.3)

    opt.register_step_pre_hook(hold_replica_0)
    opt.register_state_dict_post_hook(lambda o, sd: held.append(o is opt))

    def step(x):
        _update(model, opt, x)
        packed = opt.state_dict()
        return torch.stack([packed["state"][i]["momentum_buffer"].sum() for i in (0, 1)])

    x, parts = _batch()
    got = strategy.experimental_local_results(strategy.run(step, args=(parts,)))
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)).double()
    ref_opt = torch.optim.SGD(ref[0].parameters(), lr=0.1, momentum=0.9)
    _update(ref, ref_opt, x)
    want = torch.stack([ref_opt.state[p]["momentum_buffer"].sum() for p in ref[0].parameters()])
    for r, value in enumerate(got):
        torch.testing.assert_close(value, want, rtol=1e-12, atol=1e-15, msg=f"replica {r}")
    assert held == [True, True], "the user's state_dict hooks ran on the user's optimizer, once per replica"
    mine = replica_optimizer(opt, 1).state[model[0].weight.values[1]]["momentum_buffer"]
    assert mine is not opt.state[model[0].weight]["momentum_buffer"], "replica 1 keeps its own state"


def test_add_param_group_in_the_step_happens_once():
    strategy, model, opt = _build(torch.optim.SGD)

    def step(x, unfreeze):
        if unfreeze:   # "unfreeze the head at step k" (before: torch's "some parameters appear in more than
            opt.add_param_group({"params": model[1].parameters(), "lr": 0.05})   # one parameter group")
        _update(model, opt, x)

    strategy.run(step, args=(_batch()[1], False))
    strategy.run(step, args=(_batch()[1], True))
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.05
    assert opt.param_groups[1]["params"] == list(model[1].parameters())
    assert all(len(replica_optimizer(opt, r).param_groups) == 2 for r in range(2))


def test_load_state_dict_in_the_step_happens_once_with_replica_0s_dict():
    strategy, model, opt = _build()
    loads = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: loads.append(sd["param_groups"][0]["lr"]))
    x, parts = _batch()
    strategy.run(lambda x: _update(model, opt, x), args=(parts,))
    saved = copy.deepcopy(opt.state_dict())
    saved["param_groups"][0]["lr"] = 0.5

    def step(x):
        mine = copy.deepcopy(saved)   # each replica its own copy of the dict, as each rank loads its own
        mine["param_groups"][0]["lr"] = [0.5, 0.7][md.distribute.get_replica_context().replica_id_in_sync_group]
        opt.load_state_dict(mine)
        _update(model, opt, x)

    strategy.run(step, args=(parts,))
    assert loads == [0.5], "loaded once, replica 0's dict"
    assert [replica_optimizer(opt, r).param_groups[0]["lr"] for r in range(2)] == [0.5, 0.5]
    assert torch.equal(model[0].weight.values[0], model[0].weight.values[1])


def test_an_optimizer_each_replica_builds_in_the_step_is_its_own():
    """Optimizers built inside the step (each replica its own object, as each rank) make their own
    calls: two groups each, nothing met or merged."""
    strategy, model, _ = _build()
    built = []

    def step(x):
        opt = torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[1].parameters(), "lr": 0.01}],
                              lr=0.1)
        built.append(opt)
        _update(model, opt, x)

    strategy.run(step, args=(_batch()[1],))
    assert len(built) == 2 and built[0] is not built[1]
    assert all(len(o.param_groups) == 2 for o in built)
    assert torch.equal(model[1].weight.values[0], model[1].weight.values[1])
