"""``torch.nn.SyncBatchNorm`` under MultiWorkerMirroredStrategy synchronises across the workers' replicas
(issue 23, item 8): 2 workers x 2 logical CPUs equal BatchNorm on one device over the global batch."""

from __future__ import annotations

import pytest
import torch

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

MODEL = """
import torch
torch.set_default_dtype(torch.float64)

def make(norm):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), norm(4), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 4 * 4, 3))

g = torch.Generator().manual_seed(1)
x = torch.randn(24, 2, 6, 6, generator=g) * 3 + 1
y = torch.randn(24, 3, generator=g)
"""

BODY = MODEL + """
import json, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))
with strategy.scope():
    model = make(torch.nn.SyncBatchNorm)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

def step(xb, yb):
    optimizer.zero_grad()
    md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=8).backward()
    optimizer.step()

for xb, yb in strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(8)):
    strategy.run(step, args=(xb, yb))
state = {k: (v.values[0] if isinstance(v, md.distribute.DistributedValues) else v).double().flatten().tolist()
         for k, v in model.state_dict().items()}
print("RESULT " + json.dumps({"replicas": strategy.num_replicas_in_sync, "state": state}), flush=True)
"""


def _reference() -> dict:
    scope: dict = {}
    default_dtype = torch.get_default_dtype()
    try:
        exec(MODEL, scope)   # sets float64 as the default dtype: put it back for the other tests
        model = scope["make"](torch.nn.BatchNorm2d)
    finally:
        torch.set_default_dtype(default_dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = scope["x"], scope["y"]
    for i in range(0, 24, 8):
        optimizer.zero_grad()
        ((model(x[i:i + 8]) - y[i:i + 8]) ** 2).sum(1).mean().backward()
        optimizer.step()
    return {k: v.double().flatten() for k, v in model.state_dict().items()}


def test_sync_batch_norm_across_workers_equals_one_device():
    procs = run_cluster(BODY, workers=2, timeout=150, env={"MULTIDEV_LOGICAL_CPUS": "2"})
    expected = _reference()
    for proc in procs:
        result = results_json(proc)
        assert result["replicas"] == 4
        for name, want in expected.items():
            torch.testing.assert_close(torch.tensor(result["state"][name], dtype=torch.float64), want,
                                       rtol=1e-12, atol=1e-12, msg=lambda m, n=name: f"{n}: {m}")
