"""Python's ``random`` and numpy's global ``np.random`` re-seeded in a replica (``random.seed(seed + rank)``,
``np.random.seed(seed + rank)`` run once in ``strategy.run`` before training) stay that replica's streams in
the next runs, as each DDP rank's generators do (``distribute/host_random.py``, torch's rule): while the caller
leaves an object where the last run left it, each replica continues its own state (replicas that drew
different counts stay apart, as ranks do); a re-seed or a draw in the caller between runs reaches every
replica at the next run. Before, every run forked replica 1 from the object's state (replica 0's): its
``seed + 1`` lasted one run. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import random
import numpy as np
import multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)
own = random.Random(3)   # a program's generator made outside the step

def on_replicas(fn):
    out = {}
    def step():
        out[rid()] = fn()
    strategy.run(step)
    return [out[0], out[1]]

def draw(count=1):
    return [(random.random(), float(np.random.rand()), own.random()) for _ in range(count)]

class Rank:
    """A DDP rank's generators, seeded as the program seeds them."""
    def __init__(self, seed):
        self.py, self.np, self.own = random.Random(seed), np.random.RandomState(seed), random.Random(seed)
    def draw(self, count=1):
        return [(self.py.random(), float(self.np.rand()), self.own.random()) for _ in range(count)]

# --- 1. seed + rank in one run; the next runs continue each replica's stream ------------------------------
def seed_rank():
    random.seed(100 + rid()); np.random.seed(100 + rid()); own.seed(100 + rid())
on_replicas(seed_rank)
ranks = [Rank(100), Rank(101)]
for run in range(3):
    got = on_replicas(draw)
    assert got == [ranks[0].draw(), ranks[1].draw()], (run, got)

# --- 2. a run in which replica 1 draws nothing, then one in which both draw different counts ---------------
got = on_replicas(lambda: draw() if rid() == 0 else [])
assert got == [ranks[0].draw(), []], got
got = on_replicas(lambda: draw(2 - rid()))
assert got == [ranks[0].draw(2), ranks[1].draw(1)], got
assert on_replicas(draw) == [ranks[0].draw(), ranks[1].draw()]
assert draw() == ranks[0].draw(), "the caller continues replica 0's streams (rank 0's process)"

# --- 3. a re-seed in the caller reaches every replica, also one that draws nothing in the next run ---------
random.seed(5); np.random.seed(5); own.seed(5)
ranks = [Rank(5), Rank(5)]
got = on_replicas(lambda: draw() if rid() == 0 else [])
assert got == [ranks[0].draw(), []], got
assert on_replicas(draw) == [ranks[0].draw(), ranks[1].draw()]
print("ok")
'''


def test_seed_plus_rank_lasts_beyond_its_run(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
