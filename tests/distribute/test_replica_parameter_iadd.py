"""``module.weight += delta`` under ``torch.no_grad()`` inside ``strategy.run`` (a LoRA merge written
``self.base.weight += B @ A * scale``, a hand-written update ``model.fc.weight -= lr * model.fc.weight.grad``):
the in-place op changes the replica's own copy and Python writes the result back to the attribute. Inside a
replica the attribute reads the replica's copy, a plain tensor, and torch's ``Module.__setattr__`` refused it
(``TypeError: cannot assign 'torch.DoubleTensor' as parameter 'weight'``); the write-back of the same copy is
now a no-op, as on one device. Runs in a fresh interpreter (2 logical CPUs)."""

from __future__ import annotations

import json

from tests.conftest import run_fresh

CODE = r'''
import json
import torch
import multidev as md
from torch import nn
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
torch.manual_seed(0)
with strategy.scope():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).double()
    model[0].weight.requires_grad_(False)
w0 = model[0].weight.detach().clone()
b0 = model[1].bias.detach().clone()
x = torch.randn(8, 3, dtype=torch.float64)

def step(x):
    delta = torch.ones(4, 3, dtype=torch.float64)
    with torch.no_grad():
        model[0].weight += delta * 0.5          # a merge into the frozen weight
        model[0].weight -= delta * 0.25
    model[1].zero_grad()
    model(x).sum().backward()
    with torch.no_grad():
        model[1].bias -= 0.1 * model[1].bias.grad   # a hand-written update, each replica its own
    return model[0].weight.sum()

out = strategy.run(step, args=(x,))
local = strategy.experimental_local_results
print(json.dumps({
    "frozen": [float((c - w0 - 0.25).abs().max()) for c in local(model[0].weight)],
    "bias": [float((c - b0 + 0.1 * 8).abs().max()) for c in local(model[1].bias)],
    "still_a_variable": type(model[0]._parameters["weight"]).__name__,
}))
try:
    def swap(x):
        model[0].weight = torch.zeros(4, 3, dtype=torch.float64)
    strategy.run(swap, args=(x,))
    print(json.dumps({"swap": None}))
except Exception as e:
    print(json.dumps({"swap": type(e).__name__ + ": " + str(e)}))
'''


def test_parameter_iadd_under_no_grad_inside_the_step_updates_each_replicas_copy():
    lines = run_fresh(CODE, timeout=180).stdout.strip().splitlines()
    r, swap = json.loads(lines[-2]), json.loads(lines[-1])["swap"]
    assert r["frozen"] == [0.0, 0.0] and max(r["bias"]) < 1e-12, r
    assert r["still_a_variable"] == "MirroredVariable", r
    # assigning another tensor is still refused (it is not the replica's copy written back)
    assert swap is not None and swap.startswith("TypeError") and "parameter 'weight'" in swap, swap
