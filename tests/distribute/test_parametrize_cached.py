"""``with torch.nn.utils.parametrize.cached():`` inside ``strategy.run`` caches each replica's own computed
weights (``multidev/distribute/parametrize_cache.py``).

torch's cache of parametrized tensors is one dict of the process keyed by module and name, and one counter:
the replicas, threads of one process, shared it, so a replica read the weight another replica had computed
from its copies (torch's docs show the idiom for an RNN whose ``weight_hh`` is weight-normed and read at
every time step). Its backward then reached the other replica's copies: refused, or not, depending on which
replica computed first. Here replica 1 waits, so on the old code it always reads replica 0's weight.
"""

from __future__ import annotations

from tests.conftest import run_fresh


def test_each_replica_caches_its_own_parametrized_weights():
    proc = run_fresh("""
import time
import torch
from torch import nn
from torch.nn.utils import parametrize as P
import multidev as md

def build():
    torch.manual_seed(0)
    return nn.utils.parametrizations.weight_norm(nn.Linear(3, 4)).double()

x = torch.randn(8, 3, dtype=torch.float64)
ref = build()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
strategy = md.distribute.MirroredStrategy()
with strategy.scope():
    lin = build()
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)

def step(xb):
    rid = int(md.distribute.get_replica_context().replica_id_in_sync_group)
    opt.zero_grad()
    with P.cached():
        if rid == 1:
            time.sleep(0.1)   # replica 0 computes and caches first
        w = lin.weight
        with P.cached():   # nested: the same cache
            assert lin.weight is w
        loss = ((xb @ w.t()) @ lin.weight).pow(2).mean() * (1 + rid)
    loss.backward()
    opt.step()
    fresh = lin.weight   # outside its cached(): the updated weight, though the other replica may be inside
    with P.cached():
        assert lin.weight is not fresh and torch.equal(lin.weight, fresh)
    return loss

for _ in range(2):
    for batch in strategy.experimental_distribute_dataset(torch.utils.data.DataLoader(x, batch_size=8)):
        strategy.run(step, args=(batch,))
    ref_opt.zero_grad()
    (sum(((h @ ref.weight.t()) @ ref.weight).pow(2).mean() * (1 + i) for i, h in enumerate(x.split(4))) / 2).backward()
    ref_opt.step()
for (name, p), q in zip(lin.named_parameters(), ref.parameters()):
    for c in strategy.experimental_local_results(p):
        assert float((c - q).abs().max()) < 1e-12, name
with P.cached():   # outside runs: torch's cache, as before
    assert lin.weight is lin.weight
assert P._cache_enabled == 0 and not P._cache
print("OK")
""", env={"MULTIDEV_LOGICAL_CPUS": "2"})
    assert "OK" in proc.stdout, proc.stdout + proc.stderr
