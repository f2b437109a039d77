"""A ``collate_fn`` returning a batch object of another library (torch_geometric's ``Batch``: attributes ``x``,
``edge_index``, ``y``) read through a distributed dataset: refused naming the ports, and the port
(``experimental_distribute_values_from_function``, one object per replica) reaches each replica with its own
object, as each DDP rank's loader hands its own. One fresh interpreter."""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
from torch.utils.data import DataLoader
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

class Batch:   # torch_geometric.data.Batch's shape: a graph's tensors as attributes
    def __init__(self, x, edge_index, y):
        self.x, self.edge_index, self.y = x, edge_index, y

def collate(seeds):
    seeds = torch.stack(seeds)
    return Batch(seeds.double().unsqueeze(1), torch.stack([seeds, seeds]), seeds % 2)

loader = DataLoader(torch.arange(8), batch_size=4, collate_fn=collate)
try:
    next(iter(strategy.experimental_distribute_dataset(loader)))
except (TypeError, ValueError) as e:   # ArgumentTypeError: both
    assert "Batch" in str(e) and "experimental_distribute_values_from_function" in str(e), e
else:
    raise AssertionError("a batch object was distributed")

batches = [collate(list(torch.arange(4 * r, 4 * r + 4))) for r in range(2)]
values = strategy.experimental_distribute_values_from_function(lambda ctx: batches[ctx.replica_id_in_sync_group])
got = strategy.experimental_local_results(strategy.run(lambda b: b.x.sum() + b.edge_index.sum(), args=(values,)))
assert [float(v) for v in got] == [6.0 + 12.0, 22.0 + 44.0], got
print("OK")
'''


def test_a_batch_object_is_refused_naming_the_port(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
