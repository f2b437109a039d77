"""Weights written by hand inside ``strategy.run`` must stay equal on every worker, not only within a
worker: ``torch.autograd.grad`` gives each replica its own gradient, so ``p -= lr * g`` (or
``p.data.sub_``, which torch's version counter does not see) trains each worker on its own data.
With one replica per worker there is no second local copy to compare; the workers compare digests
of their copies and all raise MirroredStrategy's error, naming the first replica that differs (a
global id). Reduced gradients applied the same way agree and train on."""

import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

BODY = """
import json, torch, multidev as md
from torch.nn import functional as F
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=30))
ext = strategy.extended
g = torch.Generator().manual_seed(1)
x, y = torch.randn(8, 3, generator=g, dtype=torch.float64), torch.randn(8, 1, generator=g, dtype=torch.float64)
parts = [torch.tensor_split(t, strategy.num_replicas_in_sync)[ext.replica_offset:ext.replica_offset + ext.num_local_replicas]
         for t in (x, y)]
args = tuple(md.distribute.PerReplica(tuple(p)) for p in parts)

def manual(update, reduce):
    def step(xs, ys):
        params = list(model.parameters())
        grads = torch.autograd.grad(F.mse_loss(model(xs), ys), params)
        if reduce:
            grads = md.distribute.get_replica_context().all_reduce("MEAN", list(grads))
        with torch.no_grad():
            for p, grad in zip(params, grads):
                update(p, grad)
    return step

def isub(p, grad):
    p -= 0.1 * grad

def by_hand(p, grad):   # the same on every replica: local copies agree, workers differ
    p.add_(float(ext.worker_index))

outcomes, weights = {}, {}
for name, step in (("reduced", manual(isub, True)), ("isub", manual(isub, False)),
                   ("data_sub_", manual(lambda p, grad: p.data.sub_(0.1 * grad), False)),
                   ("worker_only", manual(by_hand, True))):
    with strategy.scope():   # a fresh model per case: it starts from the chief's values
        model = torch.nn.Linear(3, 1).double()
    try:
        for _ in range(2):
            strategy.run(step, args=args)
        outcomes[name] = "ok"
    except ValueError as e:
        outcomes[name] = str(e)
    weights[name] = [c.tolist() for c in model.weight.values]
print("RESULT " + json.dumps({"outcomes": outcomes, "weights": weights}))
"""


@pytest.mark.parametrize("local_replicas", ["1", "2"])
def test_hand_written_updates_agree_across_workers(local_replicas):
    procs = run_cluster(BODY, workers=2, timeout=100, env={"MULTIDEV_LOGICAL_CPUS": local_replicas})
    results = [results_json(p) for p in procs]
    assert results[0]["outcomes"] == results[1]["outcomes"], results   # every worker, the same verdict
    outcomes = results[0]["outcomes"]
    assert outcomes["reduced"] == "ok", outcomes
    assert results[0]["weights"]["reduced"] == results[1]["weights"]["reduced"], results
    drift = "was written inside strategy.run outside an optimizer step"
    first_other_worker = int(local_replicas)   # global id of worker 1's first replica
    for name in ("isub", "data_sub_"):   # each replica's own gradient: replica 1 differs
        assert drift in outcomes[name] and "replica 1's copy now differs" in outcomes[name], outcomes[name]
    assert f"replica {first_other_worker}'s copy now differs" in outcomes["worker_only"], outcomes["worker_only"]
