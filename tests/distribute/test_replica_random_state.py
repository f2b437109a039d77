"""torch's random-state functions inside ``strategy.run`` act on the calling replica's stream, as each
DDP rank's act on its own generator (``distribute/random_state_hooks.py``): ``torch.manual_seed`` in the
step, ``get_rng_state`` / ``set_rng_state``, ``torch.random.fork_rng``, and activation checkpointing
over dropout, whose recomputation in backward (where torch runs no torch function mode) replays the
forward's masks. The reference is DDP's: every rank seeded alike draws what the emulation below draws
from one generator reset to the run's starting state for each rank. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import gc
import torch, multidev as md
from torch.utils.checkpoint import checkpoint
torch.set_default_dtype(torch.float64)
ORIGINALS = (torch.manual_seed, torch.get_rng_state, torch.set_rng_state, torch.random.fork_rng)
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
local = strategy.experimental_local_results
halves = lambda t: md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))

def ranks(fn, *parts):
    """What each DDP rank gets from ``fn(part)``, every rank starting from the caller's state now."""
    start, out = torch.get_rng_state(), []
    for part in parts:
        torch.set_rng_state(start)
        out.append(fn(*part))
    return out

# --- 1. torch.manual_seed in the step: each replica restarts from the seed (a re-seeded DDP rank) --------
def seeded(step_index):
    generator = torch.manual_seed(100 + step_index)
    assert isinstance(generator, torch.Generator)
    return torch.rand(3)
got = local(strategy.run(seeded, args=(7,)))
torch.manual_seed(107)
want = torch.rand(3)
assert all(torch.equal(g, want) for g in got), got
after = torch.rand(2)                  # the caller continues replica 0's stream, as rank 0's process does
torch.manual_seed(107); torch.rand(3)
assert torch.equal(after, torch.rand(2))

# --- 2. get_rng_state / set_rng_state read and write the replica's own state ----------------------------
def replay():
    state = torch.get_rng_state()
    first = torch.rand(4)
    torch.set_rng_state(state)
    return first, torch.rand(4), torch.rand(1)
torch.manual_seed(3)
got = local(strategy.run(replay))
torch.manual_seed(3)
want = ranks(replay, (), ())
for (a, b, c), (x, y, z) in zip(got, want):
    assert torch.equal(a, b) and torch.equal(a, x) and torch.equal(c, z), (a, b, x)
def bad_state():
    torch.set_rng_state(torch.zeros(3, dtype=torch.uint8))
try:
    strategy.run(bad_state)
except RuntimeError as e:   # torch's own check, from every replica
    assert "state" in str(e).lower(), e
else:
    raise AssertionError("a malformed state was accepted")

# --- 3. fork_rng in the step: draws inside it leave the replica's stream where it was -------------------
def forked():
    with torch.random.fork_rng(devices=[]):
        inside = torch.rand(2)
    return inside, torch.rand(2)
torch.manual_seed(4)
got = local(strategy.run(forked))
torch.manual_seed(4)
want = ranks(forked, (), ())
assert all(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1]) and torch.equal(g[0], g[1]) for g, w in zip(got, want))

# --- 4. activation checkpointing over dropout (reentrant or not) gives each DDP rank's gradient ---------
torch.manual_seed(0)
with strategy.scope():
    lin = torch.nn.Linear(4, 4)
ref = torch.nn.Linear(4, 4)
ref.load_state_dict({k: v.detach().clone() for k, v in lin.state_dict().items()})
def checkpointed(model, reentrant):
    def step(x):
        x = (x * 1.0).requires_grad_()
        block = lambda t: torch.nn.functional.dropout(model(t), 0.5)
        y = checkpoint(block, x, use_reentrant=reentrant)
        (y * torch.arange(4.0)).sum().backward()
        grad = model.weight.grad.clone()
        model.zero_grad()
        return grad
    return step
x = torch.randn(4, 4)
for reentrant in (False, True):
    torch.manual_seed(5)
    got = local(strategy.run(checkpointed(lin, reentrant), args=(halves(x),)))
    torch.manual_seed(5)
    per_rank = ranks(checkpointed(ref, reentrant), *((h,) for h in torch.tensor_split(x, 2)))
    want = (per_rank[0] + per_rank[1]) / 2         # DDP's average of the ranks' gradients
    for g in got:
        torch.testing.assert_close(g, want, rtol=1e-13, atol=1e-13)

# --- 5. torch's own functions outside the replicas, and once the strategies are freed -------------------
assert torch.manual_seed is not ORIGINALS[0] and torch.random.fork_rng is not ORIGINALS[3]
torch.manual_seed(9); a = torch.rand(2)
torch.manual_seed(9); assert torch.equal(a, torch.rand(2))
del strategy, lin, local   # (a bound method holds its strategy)
gc.collect(); gc.collect()
assert (torch.manual_seed, torch.get_rng_state, torch.set_rng_state, torch.random.fork_rng) == ORIGINALS
assert torch.random.manual_seed is ORIGINALS[0]
print("ok")
'''


def test_random_state_functions_act_on_the_replicas_stream(fresh):
    proc = fresh(PROGRAM, timeout=180)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
