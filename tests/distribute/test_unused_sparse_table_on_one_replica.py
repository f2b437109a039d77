"""A leaf one replica's backward reaches and another's does not (an item tower only for batches with items,
an ``nn.Embedding(sparse=True)`` table a replica's batch never looks up): the replicas meet once more to fill
in the missing gradient (zeros, as DDP counts an unused parameter). The replica that filled it wrote into the
dict it had shared, so a replica reading the shares after that saw nothing missing and went on to the next
meeting: ``CollectiveMismatchError`` ("replica 0: call #1 barrier(loss.backward.done); replica 1: call #1
loss.backward.unused(MEAN)"), seen on every run with a sparse table. Now one device's update on the global
batch (the used replica's gradient over 2: DDP's with ``find_unused_parameters=True`` for the dense table; DDP
raises "Expected sparse gradient to be defined" for the sparse one), over several runs. One fresh
interpreter."""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
from torch import nn
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

def build(sparse):
    torch.manual_seed(0)
    table, head = nn.Embedding(6, 2, sparse=sparse).double(), nn.Linear(2, 1).double()
    optimizers = [(torch.optim.SparseAdam if sparse else torch.optim.Adam)(list(table.parameters()), 0.1),
                  torch.optim.Adam(head.parameters(), 0.1)]
    return table, head, optimizers

def loss_of(table, head, use):
    z = table(torch.tensor([1, 2])) if use else torch.ones(2, 2, dtype=torch.float64)
    return head(z).sum()

for sparse in (True, False):
    with strategy.scope():
        table, head, optimizers = build(sparse)
    def step(use):
        for o in optimizers:
            o.zero_grad()
        loss_of(table, head, bool(use)).backward()
        for o in optimizers:
            o.step()
    uses = md.distribute.PerReplica((torch.tensor(1), torch.tensor(0)))
    for _ in range(4):
        strategy.run(step, args=(uses,))
    # One device on the global batch: replica 0's half looks the rows up, replica 1's does not.
    ref_table, ref_head, ref_optimizers = build(sparse)
    for _ in range(4):
        for o in ref_optimizers:
            o.zero_grad()
        (loss_of(ref_table, ref_head, True) + loss_of(ref_table, ref_head, False)).div(2).backward()
        for o in ref_optimizers:
            o.step()
    for got, want in ((table.weight, ref_table.weight), (head.weight, ref_head.weight)):
        for copy in strategy.experimental_local_results(got):
            assert torch.allclose(copy, want, rtol=0, atol=1e-12), (sparse, copy, want)
print("OK")
'''


def test_a_leaf_unused_on_one_replica_gets_ddps_update(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
