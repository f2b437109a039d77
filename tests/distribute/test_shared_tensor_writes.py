"""Plain tensors a step function reaches from outside ``strategy.run`` (``multidev/distribute/shared_tensors.py``):
written in place by several replicas they are refused after the run, naming the tensor; written by one
replica, in disjoint regions, in a ``merge_call``, or only read, the program runs. And a variable
unfrozen inside ``strategy.run`` joins that run's gradient reduction (``requires_grad_(True)``)."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from tests.conftest import run_fresh

DEVICES = ["/cpu:0", "/cpu:1"]


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(DEVICES)


def _refusal(strategy, fn, *args) -> str | None:
    try:
        strategy.run(fn, args=args)
    except ValueError as e:
        return str(e)
    return None


def test_a_dict_of_tensors_updated_by_every_replica_is_refused_naming_it(strategy):
    avg = {"w": torch.ones(3, dtype=torch.float64)}

    def polyak(x):
        avg["w"].mul_(0.99).add_(x.mean(0), alpha=0.01)   # every replica: the average moves twice

    x = md.distribute.PerReplica((torch.zeros(2, 3, dtype=torch.float64),) * 2)
    message = _refusal(strategy, polyak, x)
    assert message is not None and "the tensor avg['w'] in place in several replicas" in message, message
    assert "replica_id_in_sync_group" in message and "merge_call" in message and "strategy.scope()" in message
    assert avg["w"].tolist() == [0.99 ** 2] * 3   # (refused after the run, which made both writes)


def test_periodic_writes_are_refused_at_the_next_write_after_the_first(strategy):
    """A write every few runs (Lookahead's sync every k steps) that first comes after the step function's
    watched first runs moves the tensor's version in an unwatched run; the runs after it are watched, and
    its next write is refused."""
    slow = [torch.zeros(2)]

    def step(i):
        if i in (5, 7):
            slow[0].add_(1.0)

    for i in range(7):
        strategy.run(step, args=(i,))   # 0-3 watched (no write), 5: both replicas add, unseen
    assert slow[0].tolist() == [2.0, 2.0]
    message = _refusal(strategy, step, 7)
    assert message is not None and "slow[0]" in message, message


def test_writes_that_agree_are_refused_too(strategy):
    """Every replica clamping one plain tensor (a clip that changes nothing the second time) is refused as
    well: whether such writes agree depends on the threads' order in general (Lookahead's ``add_`` then
    ``copy_`` on one copy of the weights does or not), so the rule does not look at the values."""
    bound = torch.tensor([3.0, -3.0, 0.5])
    message = _refusal(strategy, lambda: bound.clamp_(-1.0, 1.0))
    assert message is not None and "the tensor bound in place" in message, message


def test_one_writer_disjoint_slots_merge_call_and_reads_pass(strategy):
    counts = torch.zeros(2)
    slots = torch.zeros(2, 3)
    once = torch.zeros(1)
    table = torch.arange(3.0)

    def step(x):
        ctx = md.distribute.get_replica_context()
        r = int(ctx.replica_id_in_sync_group)
        if r == 0:
            counts.add_(1.0)                  # one replica writes
        slots[r].copy_(x.sum(0))              # each replica its own row of one tensor
        ctx.merge_call(lambda s: once.add_(1.0))   # once per step, cross-replica
        return (x * table).sum()              # only read

    x = md.distribute.PerReplica((torch.ones(2, 3), 2 * torch.ones(2, 3)))
    for _ in range(3):
        strategy.run(step, args=(x,))
    assert counts.tolist() == [3.0, 3.0] and once.tolist() == [3.0]
    assert slots.tolist() == [[2.0] * 3, [4.0] * 3]


def test_a_tensor_passed_as_a_shared_argument_and_written_is_refused(strategy):
    buffer = torch.zeros(3)
    message = _refusal(strategy, lambda b: b.add_(1.0), buffer)
    assert message is not None and "args[0]" in message, message
    per_replica = md.distribute.PerReplica((torch.zeros(3), torch.zeros(3)))   # each replica its own
    assert _refusal(strategy, lambda b: b.add_(1.0), per_replica) is None


def test_unfreezing_inside_the_run_reduces_that_runs_gradients(strategy):
    """``layer.requires_grad_(True)`` in the step, before the forward pass: that step's update uses the
    gradient summed over the replicas (one device's on the global batch), as DDP's with
    find_unused_parameters=True."""
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)).double()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)).double()
    reference.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for m in (model, reference):
        m[0].requires_grad_(False)
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randn(8, 1, dtype=torch.float64)

    def step(x, y, m=model, o=opt):
        m[0].requires_grad_(True)
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        o.step()

    strategy.run(step, args=tuple(md.distribute.PerReplica(tuple(t.split(4))) for t in (x, y)))
    step(x, y, reference, ref_opt)
    for copy in strategy.experimental_local_results(model[0].weight):
        torch.testing.assert_close(copy, reference[0].weight.detach(), rtol=0, atol=1e-12)


def test_central_storage_manual_update_through_data_is_refused():
    """CentralStorageStrategy: one copy for both replicas. word_language_model's manual update
    ``p.data.add_(p.grad, alpha=-lr)`` ran on it once per replica (twice the step, silently: torch's
    version counter does not see ``.data``); a clamp through ``.data`` (WGAN) changes nothing the second
    time and passes."""
    central = md.distribute.experimental.CentralStorageStrategy(DEVICES)
    with central.scope():
        model = torch.nn.Linear(3, 1).double()
    x = md.distribute.PerReplica((torch.ones(2, 3, dtype=torch.float64), -torch.ones(2, 3, dtype=torch.float64)))

    def clip(x):
        model(x).sum().backward()
        for p in model.parameters():
            p.data.clamp_(-0.01, 0.01)

    central.run(clip, args=(x,))
    assert model.weight.detach().abs().max() <= 0.01

    def manual_sgd(x):
        model.zero_grad()
        model(x).pow(2).mean().backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.1)

    message = _refusal(central, manual_sgd, x)
    assert message is not None and "keeps one copy that all 2 replicas share" in message, message


def test_reads_of_shared_arguments_and_sparse_tensors_pass(strategy):
    """``int(i)`` of a step counter passed to every replica (``__int__`` is no ``__iadd__``), a sparse
    adjacency read by ``torch.sparse.mm`` (gcn): no write."""
    adjacency = torch.eye(3).to_sparse()

    def step(x, i):
        return torch.sparse.mm(adjacency, x).sum() * int(i)

    x = md.distribute.PerReplica((torch.ones(3, 2), torch.ones(3, 2)))
    for i in range(2):
        strategy.run(step, args=(x, torch.tensor(float(i))))


def _polyak(target: torch.nn.Module, source: torch.nn.Module, tau: float = 0.5) -> None:
    """cleanrl's target-network update, as printed."""
    for param, target_param in zip(source.parameters(), target.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


def test_a_target_network_built_outside_the_scope_updated_in_the_step_is_refused(strategy):
    """cleanrl's SAC / DQN with the target networks built outside ``strategy.scope()``: one module for
    every replica, whose polyak update each replica made (twice a step, silently, before)."""
    with strategy.scope():
        qf = torch.nn.Linear(2, 1).double()
    target = torch.nn.Linear(2, 1).double()
    target.load_state_dict(qf.state_dict())

    def step():
        _polyak(target, qf)

    message = _refusal(strategy, step)
    assert message is not None and "the tensor target." in message and "a target network" in message, message
    with strategy.scope():
        scoped = torch.nn.Linear(2, 1).double()   # the port: built in the scope, each replica its copy
    assert _refusal(strategy, lambda: _polyak(scoped, qf)) is None


def test_a_plain_module_only_read_or_kept_per_replica_passes(strategy):
    frozen = torch.nn.Linear(2, 1).double().requires_grad_(False)
    own = {0: torch.nn.Linear(2, 1).double(), 1: torch.nn.Linear(2, 1).double()}
    with strategy.scope():
        qf = torch.nn.Linear(2, 1).double()

    def step():
        replica = int(md.distribute.get_replica_context().replica_id_in_sync_group)
        _polyak(own[replica], qf)
        return frozen(torch.ones(1, 2, dtype=torch.float64))

    for _ in range(2):
        assert _refusal(strategy, step) is None


def test_a_target_update_first_made_after_the_watched_runs_is_refused(strategy):
    """cleanrl's updates start after ``learning_starts`` steps, past the step function's watched first
    runs; the write through ``.data`` moves no version counter, so such runs are watched too."""
    with strategy.scope():
        qf = torch.nn.Linear(2, 1).double()
    target = torch.nn.Linear(2, 1).double()

    def step(global_step):
        if global_step > 6:
            _polyak(target, qf)

    for global_step in range(7):
        assert _refusal(strategy, step, global_step) is None
    message = _refusal(strategy, step, 7)
    assert message is not None and "the tensor target." in message, message


def test_central_storage_write_racing_another_replicas_backward_is_refused_as_such():
    """SAM's two steps on CentralStorageStrategy: a replica's ``p.add_(e_w)`` on the one shared copy can come
    before another replica's backward through it, whose torch "modified by an inplace operation" error then
    hid the refusal, depending on the threads' order. Here every replica writes before any backward: the
    refusal says why, torch's error is its cause."""
    # (a fresh interpreter left with os._exit: with the failed replicas' graphs alive, torch aborted the exit)
    out = run_fresh("""
import torch, multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
central = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
with central.scope():
    model = torch.nn.Linear(3, 1).double()
x = md.distribute.PerReplica((torch.ones(2, 3, dtype=torch.float64), -torch.ones(2, 3, dtype=torch.float64)))

def ascent_then_backward(x):
    loss = model(x).pow(2).sum() + model.weight.pow(2).sum()   # its backward reads the weight
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    md.distribute.get_replica_context().all_reduce("sum", torch.ones(()))   # every replica has written
    loss.backward()

try:
    central.run(ascent_then_backward, args=(x,))
except ValueError as e:
    print("REFUSED", "keeps one copy that all 2 replicas share" in str(e))
    print("CAUSE", "modified by an inplace operation" in str(e.__cause__))
import os, sys
sys.stdout.flush()
os._exit(0)   # torch may abort the interpreter's teardown with the failed replicas' graphs alive (rc -6)
""").stdout
    assert "REFUSED True" in out and "CAUSE True" in out, out
