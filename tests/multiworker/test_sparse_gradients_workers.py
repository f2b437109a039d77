"""nn.Embedding(sparse=True) + SparseAdam on MultiWorkerMirroredStrategy: sparse gradients travel
dense through the cross-process buckets (one replica per worker: the all-reduce overlapped with
backward; two: after it) and come back sparse, so SparseAdam trains as on one device."""

import pytest
import torch
from torch.nn import functional as F

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BODY = """
import json, torch, multidev as md
from torch.nn import functional as F
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))
with strategy.scope():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    head = torch.nn.Linear(3, 2).double()
    opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    opt2 = torch.optim.Adam(head.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 10, (8, 3), generator=g); y = torch.randint(0, 2, (8,), generator=g)
n, k = strategy.num_replicas_in_sync, strategy.extended.num_local_replicas
rank = strategy.cluster_resolver.task_id
mine = [p for p in torch.tensor_split(torch.arange(8), n)][rank * k:(rank + 1) * k]
parts = (md.distribute.PerReplica(tuple(ids[i] for i in mine)), md.distribute.PerReplica(tuple(y[i] for i in mine)))

def step(i, t):
    opt.zero_grad(); opt2.zero_grad()
    F.cross_entropy(head(emb(i).mean(1)), t).backward()
    sparse = emb.weight.grad.is_sparse
    opt.step(); opt2.step()
    return torch.tensor(float(sparse))

for _ in range(2):
    sparse = strategy.run(step, args=parts)
print("RESULT " + json.dumps({"sparse": [float(v) for v in strategy.experimental_local_results(sparse)],
                              "weight": emb.weight.values[0].tolist(), "equal": all(
                                  torch.equal(c, emb.weight.values[0]) for c in emb.weight.values)}))
"""


def _reference():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    head = torch.nn.Linear(3, 2).double()
    opt, opt2 = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1), torch.optim.Adam(head.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 10, (8, 3), generator=g)
    y = torch.randint(0, 2, (8,), generator=g)
    for _ in range(2):
        opt.zero_grad()
        opt2.zero_grad()
        F.cross_entropy(head(emb(ids).mean(1)), y).backward()
        opt.step()
        opt2.step()
    return emb.weight.detach()


@pytest.mark.parametrize("local_replicas", ["1", "2"])
def test_sparse_adam_on_workers_equals_one_device(local_replicas):
    procs = run_cluster(BODY, workers=2, timeout=150, env={"MULTIDEV_LOGICAL_CPUS": local_replicas})
    expected = _reference()
    for result in (results_json(p) for p in procs):
        assert result["sparse"] == [1.0] * int(local_replicas) and result["equal"]
        torch.testing.assert_close(torch.tensor(result["weight"], dtype=torch.float64), expected, rtol=1e-12, atol=1e-12)
