"""MultiWorkerMirroredStrategy across real processes on loopback: training equals one process."""

from __future__ import annotations

import json

import pytest
import torch

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BODY = """
import json, os, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))
torch.manual_seed(int(os.environ["TASK_INDEX"]) + 1)   # workers seeded differently: the chief's init wins
with strategy.scope():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    counter = md.Variable(0.0, aggregation="SUM")
g = torch.Generator().manual_seed(0)
x = torch.randn(22, 4, generator=g); y = torch.randn(22, 1, generator=g)
dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(8)     # 3 global batches, the last of 6
dist = strategy.experimental_distribute_dataset(dataset)

def step(xb, yb, n):
    opt.zero_grad()
    md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=n).backward()
    opt.step()
    counter.assign_add(float(len(xb)))
    ctx = md.distribute.get_replica_context()
    return torch.tensor(float(ctx.replica_id_in_sync_group))

ids = []
for epoch in range(2):
    for (xb, yb), (xg, _) in zip(dist, dataset):
        out = strategy.run(step, args=(xb, yb, len(xg)))
        ids.append([int(t) for t in strategy.experimental_local_results(out)])
total = strategy.reduce("SUM", strategy.run(lambda: torch.ones(1)), axis=None)
gathered = strategy.gather(strategy.run(lambda: torch.tensor([float(md.distribute.get_replica_context().replica_id_in_sync_group)])), axis=0)
print("RESULT " + json.dumps({
    "params": [p.detach().tolist() for p in model.parameters()],
    "copies_equal": all(torch.equal(c, p.values[0]) for p in model.parameters() for c in p.values),
    "replicas": strategy.num_replicas_in_sync, "ids": ids[0], "total": total.tolist(), "gathered": gathered.tolist(),
    "counter": float(counter.numpy()), "devices": list(strategy.extended.worker_devices),
    "chief": strategy.extended.should_checkpoint}), flush=True)
"""


def _reference() -> list:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(22, 4, generator=g)
    y = torch.randn(22, 1, generator=g)
    for _ in range(2):
        for i in range(0, 22, 8):
            opt.zero_grad()
            ((model(x[i:i + 8]) - y[i:i + 8]) ** 2).sum(1).mean().backward()
            opt.step()
    return [p.detach() for p in model.parameters()]


def test_two_workers_with_two_devices_each_match_one_process():
    procs = run_cluster(BODY, workers=2, timeout=150, env={"MULTIDEV_LOGICAL_CPUS": "2"})
    results = [results_json(p) for p in procs]
    expected = _reference()
    for r in results:
        assert r["replicas"] == 4 and r["copies_equal"]
        for got, want in zip(r["params"], expected):
            torch.testing.assert_close(torch.tensor(got), want, rtol=1e-5, atol=1e-6)
        assert r["total"] == [4.0]
        assert r["gathered"] == [0.0, 1.0, 2.0, 3.0]
        assert r["counter"] == 2 * 22.0  # SUM aggregation spans every worker's replicas
    assert results[0]["ids"] == [0, 1] and results[1]["ids"] == [2, 3]
    assert results[0]["devices"][0] == "/job:worker/replica:0/task:0/device:CPU:0"
    assert results[1]["devices"][1] == "/job:worker/replica:0/task:1/device:CPU:1"
    assert [r["chief"] for r in results] == [True, False]
    assert results[0]["params"] == results[1]["params"]


def test_malformed_tf_config_fails_before_any_network_activity(fresh):
    out = fresh(
        """
        import os, multidev as md
        os.environ["TF_CONFIG"] = '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}'
        try:
            md.distribute.MultiWorkerMirroredStrategy()
        except ValueError as e:
            print("ERR", e)
        """
    )
    assert "ERR" in out.stdout and "3" in out.stdout


OVERLAP_BODY = """
import json, os, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy()
rank = int(os.environ["TASK_INDEX"])
torch.manual_seed(rank + 1)
with strategy.scope():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    unused = torch.nn.Linear(2, 2)  # never gets a gradient: must stay untouched (grad None everywhere)
    opt = torch.optim.Adam(list(model.parameters()) + list(unused.parameters()), lr=0.05)
g = torch.Generator().manual_seed(0)
x = torch.randn(16, 4, generator=g); y = torch.randn(16, 1, generator=g)
def step(xb, yb, twice):
    opt.zero_grad()
    half = len(xb) // 2
    for part in ((slice(0, half), slice(half, None)) if twice else (slice(None),)):
        md.nn.compute_average_loss(((model(xb[part]) - yb[part]) ** 2).sum(1), global_batch_size=16).backward()
    opt.step()
for i in range(4):
    mine = slice(rank * 8, rank * 8 + 8)   # each worker's half of the global batch
    strategy.run(step, args=(x[mine], y[mine], i % 2 == 1))
torch.manual_seed(rank + 1)
with strategy.scope():   # a torch mean loss: averaged across workers, as DDP does
    mean_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    mean_opt = torch.optim.SGD(mean_model.parameters(), lr=0.1)
def mean_step(xb, yb):
    mean_opt.zero_grad()
    ((mean_model(xb) - yb) ** 2).sum(1).mean().backward()
    mean_opt.step()
for i in range(2):
    strategy.run(mean_step, args=(x[rank * 8:rank * 8 + 8], y[rank * 8:rank * 8 + 8]))
print("RESULT " + json.dumps({"params": [p.detach().tolist() for p in model.parameters()],
                              "mean_params": [p.detach().tolist() for p in mean_model.parameters()],
                              "unused": [p.detach().tolist() for p in unused.parameters()],
                              "overlap": type(strategy.extended._backward._overlap).__name__}), flush=True)
"""


def test_gradient_overlap_with_one_device_per_worker_matches_one_process():
    procs = run_cluster(OVERLAP_BODY, workers=2, timeout=120, env={"MULTIDEV_LOGICAL_CPUS": "1"})
    results = [results_json(p) for p in procs]
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    unused = torch.nn.Linear(2, 2)
    initial_unused = [p.detach().clone() for p in unused.parameters()]
    opt = torch.optim.Adam(list(model.parameters()) + list(unused.parameters()), lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=g)
    y = torch.randn(16, 1, generator=g)
    for _ in range(4):
        opt.zero_grad()
        ((model(x) - y) ** 2).sum(1).mean().backward()
        opt.step()
    torch.manual_seed(1)
    mean_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    mean_opt = torch.optim.SGD(mean_model.parameters(), lr=0.1)
    for _ in range(2):
        mean_opt.zero_grad()
        ((mean_model(x) - y) ** 2).sum(1).mean().backward()
        mean_opt.step()
    for r in results:
        for got, want in zip(r["mean_params"], mean_model.parameters()):
            torch.testing.assert_close(torch.tensor(got), want.detach(), rtol=1e-5, atol=1e-6)
        assert r["overlap"] == "GradientOverlap"   # loss.backward() overlaps the all-reduce: one replica per worker
        for got, want in zip(r["params"], model.parameters()):
            torch.testing.assert_close(torch.tensor(got), want.detach(), rtol=1e-5, atol=1e-6)
        for got, want in zip(r["unused"], initial_unused):  # the chief's initial values, never updated
            torch.testing.assert_close(torch.tensor(got), want)
