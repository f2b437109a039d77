"""Python's ``random`` and numpy's ``np.random`` drawn in the step, a different count on each replica
(graphsage-simple's ``MeanAggregator``: ``random.sample`` of a node's neighbours only where it has more than
``num_sample``): each DDP rank continues its own stream, apart from rank 0's, so each replica's stream
continues from where its last run left it, moved on by as many numbers as the caller drew from it in between
(counted on the mt19937 states: ``distribute/host_random_steps.py``). Before, every
run copied the first replica's state again: replica 1 drew rank 0's numbers from its second run on
(graphsage-simple 0.0038 off DDP's weights after 6 steps, silently). A re-seed in the caller between runs
still reaches every replica. One fresh interpreter; the reference emulates each rank."""

from __future__ import annotations

PROGRAM = r'''
import random
import numpy as np
import torch, multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
own = random.Random(3)   # a program's generator, shared from outside the step
counts = [[1, 5, 0, 2], [4, 0, 3, 3]]   # what each rank draws before its step's recorded draws

def draw(r, i):
    for _ in range(counts[r][i]):
        random.random(); np.random.rand(); own.random()
    return torch.tensor([random.random(), np.random.rand(), own.random()], dtype=torch.float64)

def step(i):
    return draw(int(md.distribute.get_replica_context().replica_id_in_sync_group), int(i))

def seed(n):
    random.seed(n); np.random.seed(n); own.seed(n)

def between(i):
    """The caller's draws between runs, of counts fixed in advance (``shuffle`` draws until a number fits:
    its count depends on the stream, which no count of the caller's replays)."""
    if i == 1:
        [random.random() for _ in range(5)]
    if i == 2:
        np.random.rand(700)   # past the end of numpy's 624-word block
        own.getrandbits(32 * 2000)

seed(0)
got = []
for i in range(3):
    got.append(strategy.experimental_local_results(strategy.run(step, args=(i,))))
    between(i)
seed(5)   # a re-seed between runs reaches every replica, as every rank re-seeds
got.append(strategy.experimental_local_results(strategy.run(step, args=(3,))))
for r in range(2):
    seed(0)
    want = []
    for i in range(3):
        want.append(draw(r, i))
        between(i)
    seed(5)
    want.append(draw(r, 3))
    for i in range(4):
        assert torch.equal(got[i][r], want[i]), (r, i, got[i][r], want[i])

# A cached Gaussian taken in the caller is no count of draws: the caller's state reaches every replica.
seed(0)
strategy.run(step, args=(0,))
random.gauss(0, 1)
got = strategy.experimental_local_results(strategy.run(step, args=(2,)))
assert got[0][0] != got[1][0] or counts[0][2] != counts[1][2]
print("OK")
'''


def test_each_replica_continues_its_own_host_stream(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
