"""Python's ``random`` and numpy's ``np.random`` drawn in the step, a different count on each replica
(graphsage-simple's ``MeanAggregator``: ``random.sample`` of a node's neighbours only where it has more than
``num_sample``): each DDP rank continues its own stream, apart from rank 0's, so each replica's stream
continues from where its last run left it while the caller has not drawn from it in between. Before, every
run copied the first replica's state again: replica 1 drew rank 0's numbers from its second run on
(graphsage-simple 0.0038 off DDP's weights after 6 steps, silently). A draw or re-seed in the caller between
runs still reaches every replica. One fresh interpreter; the reference emulates each rank."""

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

seed(0)
got = [strategy.experimental_local_results(strategy.run(step, args=(i,))) for i in range(3)]
seed(5)   # a re-seed between runs reaches every replica, as every rank re-seeds
got.append(strategy.experimental_local_results(strategy.run(step, args=(3,))))
for r in range(2):
    seed(0)
    want = [draw(r, i) for i in range(3)]
    seed(5)
    want.append(draw(r, 3))
    for i in range(4):
        assert torch.equal(got[i][r], want[i]), (r, i, got[i][r], want[i])
print("OK")
'''


def test_each_replica_continues_its_own_host_stream(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
