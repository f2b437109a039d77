"""torchmetrics' ``Metric`` objects updated in ``strategy.run`` on 2 replicas (``distribute/replica_metrics.py``):
what DDP's rank 0 reads after torchmetrics' sync, in the cases ``tests/programs/test_metrics_programs.py``
(the programs against DDP) leaves out: ``CatMetric``'s row order across a mid-epoch ``compute()`` (DDP: every
row of rank 0, then rank 1's), an ``update`` outside runs after updates inside, ``reset()`` inside the step,
max/min states, ``deepcopy``, an in-place state over many runs, the metric after its strategy is gone, and torchmetrics
imported after the strategy was created. One fresh interpreter (2 logical CPUs).
"""
from __future__ import annotations

import pytest

from tests.conftest import run_fresh

pytest.importorskip("torchmetrics", reason="torchmetrics is not installed (pip install torchmetrics: the test extras)")

CODE = r"""
import gc
import torch
import multidev as md

cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
import torchmetrics as tm   # after the strategy: patched at the next scope entry
with strategy.scope():
    model = torch.nn.Linear(2, 2)
torch.set_default_dtype(torch.float64)
cat, total, top, low = tm.CatMetric(), tm.SumMetric(), tm.MaxMetric(), tm.MinMetric()
rows = [torch.arange(8, dtype=torch.float64) + 10 * s for s in range(3)]   # 3 global batches of 8

def step(x):
    cat.update(x)
    total.update(x)
    top.update(x)
    low.update(x)

def run(x):
    strategy.run(step, args=(strategy.experimental_distribute_values_from_function(
        lambda ctx: x.tensor_split(2)[ctx.replica_id_in_sync_group]),))

def halves(batches, r):
    return [b.tensor_split(2)[r] for b in batches]

run(rows[0])
first = cat.compute().tolist()
assert first == torch.cat(halves(rows[:1], 0) + halves(rows[:1], 1)).tolist(), first
run(rows[1])
ddp_order = torch.cat(halves(rows[:2], 0) + halves(rows[:2], 1)).tolist()
assert cat.compute().tolist() == ddp_order, (cat.compute().tolist(), ddp_order)   # a mid-epoch compute keeps it
assert float(total.compute()) == float(torch.cat(rows[:2]).sum())
assert float(top.compute()) == 17.0 and float(low.compute()) == 0.0
import copy
twin = copy.deepcopy(cat)   # (torchmetrics' clone()): a plain metric holding every replica's rows
assert twin.compute().tolist() == ddp_order, twin.compute().tolist()

# update outside runs after updates inside: the metric continues from every replica's states
extra = torch.tensor([100.0, 101.0])
cat.update(extra)
total.update(extra)
assert cat.compute().tolist() == ddp_order + [100.0, 101.0], cat.compute().tolist()
assert float(total.compute()) == float(torch.cat(rows[:2]).sum()) + 201.0
print("outside update ok")

# reset() inside the step: each replica resets its own (as each rank), then updates
def reset_step(x):
    total.reset()
    total.update(x)
strategy.run(reset_step, args=(strategy.experimental_distribute_values_from_function(
    lambda ctx: rows[2].tensor_split(2)[ctx.replica_id_in_sync_group]),))
assert float(total.compute()) == float(rows[2].sum()), float(total.compute())

# an in-place state (SumMetric's ``sum_value += ...``) over many runs: nothing lost
total.reset()
for i in range(200):
    run(torch.ones(8, dtype=torch.float64))
assert float(total.compute()) == 1600.0, float(total.compute())
print("many runs ok")

# the strategy gone: the metric keeps every replica's total, one value again
cat.reset()
run(rows[0])
del strategy, model
gc.collect()
assert cat.compute().tolist() == rows[0].tolist(), cat.compute().tolist()
assert float(total.compute()) == 1600.0 + float(rows[0].sum())
print("all ok")
"""


def test_metric_states_on_replicas():
    out = run_fresh(CODE, timeout=180).stdout
    assert "all ok" in out, out
