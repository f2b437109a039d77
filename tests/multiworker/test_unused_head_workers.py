"""A head only one worker's replicas reach (a task whose labels only that worker's shards hold; DDP's
``find_unused_parameters=True``) on MultiWorkerMirroredStrategy with 2 workers of 2 replicas each: every worker
reduces the same buckets, the head's gradient counting zeros where a replica did not reach it, as one device's
mean over the 4 shards. Each worker reduced the leaves its own replicas reached: the workers' buckets differed
and the all-reduce failed with a collective mismatch (``tests/programs/loss_programs4.py`` under
``multidev launch`` with 2 logical CPUs a worker)."""

import pytest
import torch

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BODY = """
import json, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))
torch.manual_seed(0)
with strategy.scope():
    trunk, head = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 1).double()
    opt = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.1)
x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
n, k = strategy.num_replicas_in_sync, strategy.extended.num_local_replicas
rank = strategy.cluster_resolver.task_id
parts = md.distribute.PerReplica(tuple(torch.tensor_split(x, n)[rank * k:(rank + 1) * k]))

def step(part):
    opt.zero_grad()
    h = trunk(part)
    uses_head = int(md.distribute.get_replica_context().replica_id_in_sync_group) == 0   # worker 0's first
    (h.pow(2).mean() + (head(h).pow(2).mean() if uses_head else 0)).backward()
    opt.step()
    return torch.zeros(())

for _ in range(2):
    strategy.run(step, args=(parts,))
print("RESULT " + json.dumps({"params": [p.values[0].detach().reshape(-1).tolist() for p in
                                         (*trunk.parameters(), *head.parameters())]}))
"""


def _reference():
    torch.manual_seed(0)
    trunk, head = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 1).double()
    opt = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.1)
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for _ in range(2):
        opt.zero_grad()
        losses = [trunk(p).pow(2).mean() + (head(trunk(p)).pow(2).mean() if r == 0 else 0)
                  for r, p in enumerate(torch.tensor_split(x, 4))]
        (sum(losses) / 4).backward()   # the mean of the 4 replicas' gradients
        opt.step()
    return [p.detach().reshape(-1) for p in (*trunk.parameters(), *head.parameters())]


def test_a_head_one_worker_reaches_trains_as_the_mean_over_replicas():
    procs = run_cluster(BODY, workers=2, timeout=150, env={"MULTIDEV_LOGICAL_CPUS": "2"})
    expected = _reference()
    for result in (results_json(p) for p in procs):
        for got, want in zip(result["params"], expected):
            torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), want, rtol=1e-12, atol=1e-13)
