"""Draws the caller makes between runs (a DataLoader's iterator drawing its base seed, ``shuffle=True``'s
sampler seed, ``torch.rand`` in the loop, ``random.random()``, ``np.random.rand``) are drawn by every DDP
rank's process from its own generator. When the replicas' streams stand apart (``torch.manual_seed(seed +
rank)``, ``random.seed`` / ``np.random.seed`` likewise, run once in ``strategy.run``), each replica's stream
advances by what the caller drew, as its rank's would; before, the next run forked every replica from the
caller's (replica 0's) state, and ``seed + rank`` lasted until the first DataLoader epoch. Draws whose
count depends on the values drawn (``random.shuffle``, ``randint``: rejection sampling) advance each replica by
the caller's count: apart, but not its rank's numbers. A re-seed in the caller still reaches every replica.
The reference emulates each rank's process. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import random
import numpy as np
import torch, multidev as md
from torch.utils.data import DataLoader, TensorDataset
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)
loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, shuffle=True)
items = list(range(10))

def on_replicas(fn):
    out = {}
    def step():
        out[rid()] = fn()
    strategy.run(step)
    return [out[0], out[1]]

def seed_all(seed):
    torch.manual_seed(seed); random.seed(seed); np.random.seed(seed)

def draw():
    return torch.rand(2).tolist(), random.random(), float(np.random.rand())

def between_runs(epoch):
    """What the program's loop does in the caller: a DataLoader epoch, a shuffle, a draw per step."""
    batches = [b[0].tolist() for b in loader] if epoch % 2 == 0 else []
    return batches, [random.random() for _ in range(3)], torch.rand(1).tolist(), np.random.rand(2).tolist()

def ranks_reference(seeds, epochs):
    """Each rank's process: the same caller code and step on its own generators."""
    out = []
    for seed in seeds:
        seed_all(0); items[:] = range(10)
        seed_all(seed)
        rank = []
        for epoch in range(epochs):
            rank.append((between_runs(epoch), draw()))
        out.append(rank)
    return out

def ours(seed_in_step, epochs):
    seed_all(0); items[:] = range(10)
    on_replicas(seed_in_step)
    got = [[], []]
    for epoch in range(epochs):
        caller = between_runs(epoch)
        for r, d in enumerate(on_replicas(draw)):
            got[r].append((caller, d))
    return got

# --- 1. seed + rank, then a loop whose caller draws between runs ------------------------------------------
got = ours(lambda: seed_all(100 + rid()), 4)
want = ranks_reference([100, 101], 4)
assert got[0] == want[0], (got[0], want[0])
assert [d for _, d in got[1]] == [d for _, d in want[1]], (got[1], want[1])

# --- 2. seeded alike, replicas drawing different counts in one run: they stay apart across the caller's draws --
def uneven():
    for _ in range(1 + rid()):
        draw()
got = ours(uneven, 3)
seed_all(0); items[:] = range(10)
reference = []
for rank in range(2):
    seed_all(0); items[:] = range(10)
    for _ in range(1 + rank):
        draw()
    reference.append([(between_runs(e), draw()) for e in range(3)])
assert [d for _, d in got[1]] == [d for _, d in reference[1]], (got[1], reference[1])
assert got[0] == reference[0]

# --- 3. draws whose count depends on the values (random.shuffle's rejection sampling): the replicas stay apart --
on_replicas(lambda: seed_all(100 + rid()))
random.shuffle(items)
got = on_replicas(draw)
assert got[0] != got[1], got

# --- 4. a re-seed in the caller reaches every replica -----------------------------------------------------
on_replicas(lambda: seed_all(100 + rid()))
seed_all(7)
got = on_replicas(draw)
seed_all(7)
assert got[0] == got[1] == draw(), got
print("ok")
'''


def test_replicas_streams_advance_by_the_callers_draws(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
