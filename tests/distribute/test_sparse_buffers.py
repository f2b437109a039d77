"""A sparse buffer (a GCN's normalised adjacency kept with ``register_buffer("adj", adj.to_sparse())``) on a
model built in a strategy's scope: the step function's first run compared every replica's copy with
``torch.equal``, which has no sparse kernel (``NotImplementedError: Could not run 'aten::equal' with arguments
from the 'SparseCPU' backend``); the workers' initial broadcast reshaped it and the cross-worker read summed it
densely (``RuntimeError``; ``tests/programs/test_graph_programs.py`` runs those under ``multidev launch``). Now
it trains as on one device, copies written apart are refused as a dense buffer's are, and ``state_dict()``
gives it back sparse. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
from torch import nn
from torch.nn import functional as F
from multidev.distribute.copy_agreement import digests
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
N = 8
g = torch.Generator().manual_seed(0)
x = torch.rand(N, 3, dtype=torch.float64, generator=g)
y = torch.randint(0, 2, (N,), generator=g)
a = (torch.rand(N, N, generator=g) < 0.3).double() + torch.eye(N, dtype=torch.float64)
adj = (a / a.sum(1, keepdim=True)).to_sparse()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("adj", adj.clone())
        self.lin = nn.Linear(3, 2).double()
    def forward(self, x):
        return torch.sparse.mm(self.adj, self.lin(x))

def train(strategy):
    torch.manual_seed(0)
    with strategy.scope() if strategy else torch.enable_grad():
        model = Net()
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
    def step(idx):
        opt.zero_grad()
        F.cross_entropy(model(x)[idx], y[idx]).backward()
        opt.step()
    halves = md.distribute.PerReplica((torch.arange(4), torch.arange(4, 8)))
    for _ in range(3):
        strategy.run(step, args=(halves,)) if strategy else step(torch.arange(8))
    return model

ref, got = train(None), train(strategy)
assert all(torch.allclose(p, q, rtol=0, atol=1e-12) for p, q in zip(ref.parameters(), got.parameters()))
state = got.state_dict()["adj"]
assert state.is_sparse and torch.equal(state.to_dense(), adj.to_dense()), state
copies = strategy.experimental_local_results(got.adj)
assert all(c.is_sparse for c in copies)
assert torch.equal(digests(got.adj)[0], digests(got.adj)[1])   # the workers' comparison, by coalesced entries

# Each replica rescaling its own copy differently in the first run: refused, as a dense buffer would be.
with strategy.scope():
    model = Net()
def rescale():
    rid = md.distribute.get_replica_context().replica_id_in_sync_group
    with torch.no_grad():
        model.adj.mul_(1.0 + rid)
    return model(x).sum()
try:
    strategy.run(rescale)
except ValueError as e:
    assert "Net.adj" in str(e) and "replica 1's copy differs from replica 0's" in str(e), e
else:
    raise AssertionError("copies written apart were not refused")
print("OK")
'''


def test_a_sparse_buffer_trains_and_is_compared(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
