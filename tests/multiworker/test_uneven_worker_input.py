"""Workers that read different amounts of data stay in lockstep: exhausted ones get empty batches."""

from __future__ import annotations

import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

BODY = """
import json, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=20))
worker = strategy.extended.worker_index
examples = 12 if worker == 0 else 4          # worker 0 has three batches of its own, worker 1 one
options = md.data.Options()
options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.OFF
ds = md.data.Dataset.from_tensor_slices(torch.ones(examples, 2)).batch(4).with_options(options)
totals = []
for xb in strategy.experimental_distribute_dataset(ds):
    ctx = lambda: md.distribute.get_replica_context()
    total = strategy.run(lambda x: ctx().all_reduce("SUM", torch.tensor([float(x.shape[0])])), args=(xb,))
    totals.append(float(total))
print("RESULT " + json.dumps({"totals": totals}), flush=True)
"""


def test_exhausted_worker_gets_empty_batches_until_all_are_done():
    results = [results_json(p) for p in run_cluster(BODY, workers=2, timeout=100)]
    # Each worker's own batch of 4 is split into two steps of 2 (one per replica of the job).
    assert results[0]["totals"] == results[1]["totals"] == [4.0, 4.0, 2.0, 2.0, 2.0, 2.0]


DATA_BODY = """
import json, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=20))
ds = md.data.Dataset.range(20).batch(8)      # no files: AUTO shards by DATA (every worker reads every batch)
parts = [b.tolist() for b in strategy.experimental_distribute_dataset(ds)]
print("RESULT " + json.dumps({"parts": parts}), flush=True)
"""


def test_data_sharding_spreads_the_partial_batch_over_the_workers():
    """TF splits the last global batch of 4 over the 2 replicas of the job as [2, 2], not [4, 0]."""
    results = [results_json(p) for p in run_cluster(DATA_BODY, workers=2, timeout=100,
                                                    env={"MULTIDEV_LOGICAL_CPUS": "1"})]
    assert results[0]["parts"] == [[0, 1, 2, 3], [8, 9, 10, 11], [16, 17]]
    assert results[1]["parts"] == [[4, 5, 6, 7], [12, 13, 14, 15], [18, 19]]
