"""A program's own ``torch.Generator`` drawn with ``generator=`` in the step is shared by the replica threads,
where each DDP rank holds its own: the first replica draws from the object, the others from copies of its
state at the run's first draw (``placement/replica_random.py``). torch's Generator methods cannot be routed
(an immutable C type), so a ``g.manual_seed(s)`` / ``g.set_state(...)`` in the step reset the object under the
first replica's draws (it drew the same numbers twice, in the threads' order) and never reached the other
replicas' copies: silently wrong. It is refused saying why and naming the port, at the latest in the second
run: a state change between the first replica's draws, or before the run's first draw. Draws alone, a
re-seed in the caller between runs, and a generator made in the step are as DDP's ranks; replicas that drew
different counts from the generator continue their own positions in the next runs, as the ranks' generators
(before, every run forked them from the first replica's). One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import time
import torch, multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
local = strategy.experimental_local_results
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)
g = torch.Generator().manual_seed(0)

def reseeded_in_step():
    g.manual_seed(1000)
    a = torch.rand(2, generator=g)
    time.sleep(0.02 * (1 - rid()))   # (replica 1's re-seed lands between replica 0's draws)
    return torch.cat([a, torch.rand(2, generator=g)])

def set_state_in_step(state):
    def step():
        first = torch.rand(2, generator=g)
        g.set_state(state)
        return torch.cat([first, torch.rand(2, generator=g)])
    return step

for case in ("manual_seed", "set_state"):
    g = torch.Generator().manual_seed(0)   # (one generator per case: a refused generator stays refused)
    step = reseeded_in_step if case == "manual_seed" else set_state_in_step(g.get_state())
    refused = []
    for run in range(3):
        try:
            strategy.run(step)
        except ValueError as e:
            message = str(e)
            assert "torch.Generator" in message and "manual_seed" in message and "inside the step" in message, message
            refused.append(run)
    assert refused[-2:] == [1, 2], (step, refused)

# --- draws alone, a re-seed in the caller between runs, a generator made in the step: each rank's numbers ---
g = torch.Generator().manual_seed(0)
def draws():
    return torch.rand(3, generator=g)
def own():
    mine = torch.Generator().manual_seed(5)
    return torch.rand(3, generator=mine)
for epoch in range(3):
    g.manual_seed(epoch)
    got = local(strategy.run(draws)) + local(strategy.run(draws))
    rank = torch.Generator().manual_seed(epoch)
    want = [torch.rand(3, generator=rank), torch.rand(3, generator=rank)]
    assert all(torch.equal(a, b) for a, b in zip(got, [want[0], want[0], want[1], want[1]])), (got, want)
    assert torch.equal(g.get_state(), rank.get_state()), "the caller continues rank 0's"
    mine = local(strategy.run(own))
    alone = torch.rand(3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(mine[0], mine[1]) and torch.equal(mine[0], alone)
# --- a generator each replica makes in the step is its own: re-seeding it there is its rank's, never refused ---
def own_reseeded():
    mine = torch.Generator().manual_seed(5)
    first = torch.rand(2, generator=mine)
    mine.manual_seed(5)
    return torch.cat([first, torch.rand(2, generator=mine)])
for run in range(2):
    got = local(strategy.run(own_reseeded))
    assert torch.equal(got[0][:2], got[0][2:]), got   # (replica 1 draws from a copy: see the docs' limits)

# --- replicas that drew different counts from it continue their own positions, as the ranks' generators ---
def uneven():
    return torch.cat([torch.rand(1, generator=g) for _ in range(1 + rid())])
g = torch.Generator().manual_seed(0)
got = [local(strategy.run(uneven)), local(strategy.run(draws))]
torch.rand(5, generator=g)   # (the caller draws in between: each rank's process draws those too)
got.append(local(strategy.run(draws)))
ranks = [torch.Generator().manual_seed(0) for _ in range(2)]
for r, rank in enumerate(ranks):
    want = [torch.cat([torch.rand(1, generator=rank) for _ in range(1 + r)]), torch.rand(3, generator=rank)]
    torch.rand(5, generator=rank)
    want.append(torch.rand(3, generator=rank))
    assert all(torch.equal(run[r], w) for run, w in zip(got, want)), (r, got, want)
print("ok")
'''


def test_a_shared_generator_reseeded_in_the_step_is_refused(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
