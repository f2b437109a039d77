"""``distribute_datasets_from_function``'s torch loaders, one per replica, draw as DDP's ranks draw: each
pipeline's reading (``iter(loader)``'s base seed, a ``RandomSampler``'s order, draws in ``__getitem__`` from
torch, ``random`` and ``np.random``) takes the values its rank takes from its own identically seeded streams,
and the caller's streams advance as one rank's (before: pipeline 1 drew the values after pipeline 0's, and the
caller's generator advanced once per pipeline, so the step's dropout after the first epoch differed from
DDP's). Reading a loader for its element spec draws nothing. One fresh interpreter, 2 logical CPUs."""
from __future__ import annotations

import json

import pytest

CODE = r'''
import json, random, types
import numpy as np, torch, multidev as md
from torch.utils.data import DataLoader, Dataset, DistributedSampler

class Noisy(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.tensor(i), torch.rand(()), torch.tensor(random.random()), torch.tensor(float(np.random.rand()))

def seeded():
    torch.manual_seed(0); random.seed(0); np.random.seed(0)
    return torch.Generator().manual_seed(1)

def loaders(g):   # the two ways DDP programs write it: a DistributedSampler, a shuffle with the recipe's g
    return {"distributed": lambda ctx: DataLoader(Noisy(), batch_size=2, sampler=DistributedSampler(
                Noisy(), ctx.num_input_pipelines, ctx.input_pipeline_id, shuffle=False)),
            "shared_g": lambda ctx: DataLoader(Noisy(), batch_size=2, shuffle=True, generator=g),
            "own_g": lambda ctx: DataLoader(Noisy(), batch_size=2, shuffle=True,
                                            generator=torch.Generator().manual_seed(2))}

def rank(kind, r):   # a DDP rank: its own loader read for two epochs, then the step's draw
    g = seeded()
    ctx = types.SimpleNamespace(num_input_pipelines=2, input_pipeline_id=r)
    loader = loaders(g)[kind](ctx)
    rows = [[t.tolist() for t in batch] for _ in range(2) for batch in loader]
    return {"rows": rows, "after": [torch.rand(()).item(), random.random(), float(np.random.rand()), g.initial_seed(),
                                    torch.rand((), generator=g).item()]}

strategy = md.distribute.MirroredStrategy()
options = md.distribute.InputOptions(experimental_replication_mode=md.distribute.InputReplicationMode.PER_REPLICA)
out = {}
for kind in ("distributed", "shared_g", "own_g"):
    g = seeded()
    dist = strategy.distribute_datasets_from_function(loaders(g)[kind], options)
    dist.element_spec   # reading it draws nothing
    per_replica = [[], []]
    for _ in range(2):
        for batch in dist:
            for r in range(2):
                per_replica[r].append([strategy.experimental_local_results(t)[r].tolist() for t in batch])
    after = [torch.rand(()).item(), random.random(), float(np.random.rand()), g.initial_seed(),
             torch.rand((), generator=g).item()]
    out[kind] = {"ours": [{"rows": per_replica[r], "after": after} for r in range(2)],
                 "ddp": [rank(kind, r) for r in range(2)]}
print("RESULT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def results():
    from tests.conftest import run_fresh
    proc = run_fresh(CODE, env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=180)
    return json.loads(proc.stdout.split("RESULT", 1)[1])


@pytest.mark.parametrize("kind", ["distributed", "shared_g", "own_g"])
def test_each_pipeline_draws_what_its_rank_draws(results, kind):
    ours, ddp = results[kind]["ours"], results[kind]["ddp"]
    for r in range(2):
        assert ours[r]["rows"] == ddp[r]["rows"], f"pipeline {r}: examples and draws of rank {r}"


@pytest.mark.parametrize("kind", ["distributed", "shared_g", "own_g"])
def test_the_callers_streams_advance_as_one_ranks(results, kind):
    """The draws after two epochs (the step's dropout, the next augmentation) are rank 0's."""
    assert results[kind]["ours"][0]["after"] == results[kind]["ddp"][0]["after"]
