"""A torch ``DataLoader`` whose batch is smaller than the replicas it is split across is refused
(``multidev/distribute/torch_sampler.check_loader_feeds_every_replica``), and one whose tensors are not
batch-first (``check_examples_along_dim0``: the translation tutorial's ``pad_sequence`` collate, split
along the sentences when source and target had one length, silently).

PyTorch's "Classifying names with a character-level RNN" trains one name per step; its DDP port reads a
``DataLoader(batch_size=1)`` through a ``DistributedSampler``, each rank its own name. Ported with the two
lines, the loader's batch of 1 was the global batch: replica 1 trained on an empty batch at every step
(its loss nan, its zero gradient averaged in: half of one name's gradient per step, silently). Now
``experimental_distribute_dataset`` raises naming the two fixes; the first,
``distribute_datasets_from_function`` with the same loader, gives each replica its own name, as DDP.
"""

from __future__ import annotations

from tests.conftest import run_fresh

PROGRAM = """
import torch
import multidev as md
from torch import nn
from torch.utils.data import DataLoader, Dataset

class Names(Dataset):   # names of different lengths: a batch of one needs no padding
    def __len__(self): return 6
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.tensor([i % 3]), torch.randn(i + 2, 1, 5, generator=g, dtype=torch.float64)

strategy = md.distribute.MirroredStrategy()
with strategy.scope():
    torch.manual_seed(0)
    rnn = nn.RNN(5, 4).double()
    head = nn.Linear(4, 3).double()
    opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
start = [p.detach().clone() for p in [*rnn.parameters(), *head.parameters()]]

def step(category, line):   # the tutorial's train(): the sequence-first line tensor, one hidden state
    opt.zero_grad()
    output, hidden = rnn(line[0])
    loss = nn.functional.cross_entropy(head(hidden[-1]), category[0])
    loss.backward()
    opt.step()
    return loss.detach()

for size in (1, torch.tensor(1).item()):
    try:
        strategy.experimental_distribute_dataset(DataLoader(Names(), batch_size=size))
    except ValueError as e:
        message = str(e)
    else:
        raise AssertionError("a batch of 1 for 2 replicas was split")
for part in ("batch_size=1 for 2 replicas", "empty batch at every step",
             "distribute_datasets_from_function(lambda ctx: DataLoader(dataset, batch_size=1, "
             "sampler=DistributedSampler(dataset, num_replicas=ctx.num_input_pipelines, rank=ctx.input_pipeline_id)))",
             "DataLoader(dataset, batch_size=1 * strategy.num_replicas_in_sync)"):
    assert part in message, message
assert [len(b[0].values) for b in strategy.experimental_distribute_dataset(
    DataLoader(torch.utils.data.TensorDataset(torch.arange(5)), batch_size=2))] == [2, 2, 2], "a short last batch"

losses = [strategy.experimental_local_results(strategy.run(step, args=batch))
          for batch in strategy.distribute_datasets_from_function(lambda ctx: DataLoader(Names(), batch_size=1))]
assert all(not torch.isnan(l).any() for pair in losses for l in pair) and len(losses) == 3
# DDP's ranks: rank r takes names r, r + 2, ...; each step the mean of the two names' gradients
torch.manual_seed(0)
ref_rnn, ref_head = nn.RNN(5, 4).double(), nn.Linear(4, 3).double()
with torch.no_grad():
    for p, s in zip([*ref_rnn.parameters(), *ref_head.parameters()], start):
        p.copy_(s)
ref_opt = torch.optim.SGD([*ref_rnn.parameters(), *ref_head.parameters()], lr=0.1)
names = Names()
for i in range(0, 6, 2):
    ref_opt.zero_grad()
    for c, line in (names[i], names[i + 1]):
        _, hidden = ref_rnn(line)
        (nn.functional.cross_entropy(ref_head(hidden[-1]), c) / 2).backward()
    ref_opt.step()
for p, q in zip([*rnn.parameters(), *head.parameters()], [*ref_rnn.parameters(), *ref_head.parameters()]):
    torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-12, atol=1e-12)

# The translation tutorial's collate_fn: pad_sequence's (S, N) layout, source and target of one length here
from torch.nn.utils.rnn import pad_sequence
pairs = [(torch.arange(k), torch.arange(k).flip(0)) for k in (3, 5, 2, 4, 5, 3)]
def collate_fn(batch):
    return pad_sequence([s for s, _ in batch], padding_value=1), pad_sequence([t for _, t in batch], padding_value=1)
ran = []
try:
    for src, tgt in strategy.experimental_distribute_dataset(DataLoader(pairs, batch_size=4, collate_fn=collate_fn)):
        ran.append(src)
except ValueError as e:
    message = str(e)
else:
    raise AssertionError("sequence-first batches were split along the sentences")
assert not ran, "refused before the first batch reached a replica"
for part in ("batch 0 of the torch DataLoader holds 4 examples, but its tensors have 5 rows along dimension 0",
             "pad_sequence(..., batch_first=True)", "src = src.t()"):
    assert part in message, message
def batch_first(batch):
    return tuple(t.t() for t in collate_fn(batch))
shapes = [[tuple(v.shape) for v in src.values] for src, _ in
          strategy.experimental_distribute_dataset(DataLoader(pairs, batch_size=4, collate_fn=batch_first))]
assert shapes == [[(2, 5), (2, 5)], [(1, 5), (1, 5)]], shapes
print("DONE")
"""


def test_loader_batches_that_cannot_feed_every_replica_are_refused():
    """A batch of one for 2 replicas, and sequence-first batches (refused before any step); the fixes train."""
    proc = run_fresh(PROGRAM, env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=180)
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr
