"""Draws the caller makes between runs (a new epoch's ``for batch in loader`` draws the loader's base seed;
``torch.rand`` in the loop) after replicas drew different counts in the step (neighbour sampling whose count
depends on the subgraph, negatives per positive): each DDP rank draws the caller's numbers from its own
diverged stream, so each replica's stream advances by as many draws as the caller's, and stays its own.
Before, every replica was forked again from the caller's state (rank 0's): replica 1 drew rank 0's numbers
from then on (a GAT sampling subgraphs in the step ended 0.028 off DDP's weights after 2 epochs, silently).
A re-seed, ``set_rng_state`` or a cached normal sample in the caller still reach every replica. One fresh
interpreter; the reference emulates each rank on one generator.

Likewise ``distribute_datasets_from_function``'s pipelines (one per replica) read on their replica's own
stream: a ``collate_fn`` drawing as many numbers as its batch asks (GraphSAGE's sampled subgraphs) drew from
a copy of pipeline 0's state each round before, so pipeline 1 drew pipeline 0's numbers again from the
second batch on."""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
from torch.utils.data import DataLoader
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
local = strategy.experimental_local_results
counts = md.distribute.PerReplica((torch.tensor(3), torch.tensor(700)))   # replica 1 crosses a twist of mt19937

def step(n):
    return torch.randint(0, 1000, (int(n),))[:3]

def ranks(between):
    """Each rank: the step's draws (its own count), the caller's ``between``, the step again (3 draws)."""
    out = []
    for n in (3, 700):
        torch.manual_seed(0)
        step(n)
        between()
        out.append(step(3))
    return out

def check(between, name):
    torch.manual_seed(0)
    strategy.run(step, args=(counts,))
    between()
    got = local(strategy.run(step, args=(torch.tensor(3),)))
    want = ranks(between)
    assert all(torch.equal(g, w) for g, w in zip(got, want)), (name, got, want)
    assert not torch.equal(got[0], got[1]), name

loader = DataLoader(list(range(4)), batch_size=2)
check(lambda: [b for b in loader], "a new epoch's loader (its base seed)")
check(lambda: torch.rand(5), "torch.rand(5)")
check(lambda: torch.randint(0, 2**40, (2000,)), "2000 64-bit draws (several twists)")
check(lambda: None, "nothing drawn")

# A re-seed between runs reaches every replica as before (every rank re-seeds alike).
torch.manual_seed(0)
strategy.run(step, args=(counts,))
torch.manual_seed(5)
got = local(strategy.run(step, args=(torch.tensor(3),)))
torch.manual_seed(5)
want = step(3)
assert all(torch.equal(g, want) for g in got), got

# --- Pipelines of distribute_datasets_from_function (one per replica) read on their replica's stream ---------
# Each rank's loader collates with as many draws as its batch asks (a neighbour sampler: one per edge), and
# its step draws after: one generator per rank, continued from read to step to read.
options = md.distribute.InputOptions(experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
sizes = [[3, 700, 5], [40, 2, 650]]   # each rank's batches: how many draws its collate makes
collate = lambda batch: (torch.randint(0, 1000, (int(batch[0]),))[:3], batch[0])

def loader(num_pipelines, pipeline_id):
    return DataLoader(sizes[pipeline_id], batch_size=1, collate_fn=collate)

def sample_step(drawn, n):
    return torch.cat([drawn, torch.randint(0, 1000, (int(n) % 7 + 1,))[:1]])

def rank(r):
    torch.manual_seed(1)
    return [sample_step(*batch) for _ in range(2) for batch in loader(2, r)]

torch.manual_seed(1)
dist = strategy.distribute_datasets_from_function(lambda ctx: loader(ctx.num_input_pipelines, ctx.input_pipeline_id),
                                                  options)
got = [local(strategy.run(sample_step, args=batch)) for _ in range(2) for batch in dist]
after = torch.rand(3)   # the caller's stream stands where rank 0's does
want = [rank(0), rank(1)]
for step, values in enumerate(got):
    assert all(torch.equal(values[r], want[r][step]) for r in range(2)), (step, values, want[0][step], want[1][step])
rank(0)
assert torch.equal(after, torch.rand(3))
print("OK")
'''


def test_caller_draws_and_pipeline_reads_move_each_replica_stream_as_its_rank(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr
