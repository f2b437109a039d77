"""``experimental_distribute_dataset`` of a DataLoader whose ``batch_sampler=`` is the program's (a length-bucketing
sampler: batch sizes vary, a bucket's remainder may hold one example): a batch of fewer examples than the replicas
gave a replica an empty batch (a nan loss, a zero gradient averaged in: that step's gradient halved, silently); it
is now refused naming the per-pipeline port. torch's own ``BatchSampler`` passed as ``batch_sampler=`` keeps
TensorFlow's split of a short last batch; batches that feed every replica train as before. 2 logical CPUs."""
from __future__ import annotations

import json

import pytest

CODE = r'''
import json, torch, multidev as md
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

strategy = md.distribute.MirroredStrategy()
data = TensorDataset(torch.arange(8.0).reshape(8, 1))

def rows(loader):
    try:
        return [[len(t[0]) for t in strategy.experimental_local_results(b)] for b in
                strategy.experimental_distribute_dataset(loader)]
    except ValueError as e:
        return "ValueError: " + str(e)

out = {
    "bucket_with_one": rows(DataLoader(data, batch_sampler=[[0, 1, 2], [3], [4, 5, 6, 7]])),
    "bucket_all_fed": rows(DataLoader(data, batch_sampler=[[0, 1, 2], [3, 4], [5, 6, 7]])),
    "torch_batch_sampler": rows(DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(range(7)), 2, False))),
}
print("RESULT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def results():
    from tests.conftest import run_fresh
    proc = run_fresh(CODE, env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=120)
    return json.loads(proc.stdout.split("RESULT", 1)[1])


def test_a_sampled_batch_below_the_replicas_is_refused(results):
    error = results["bucket_with_one"]
    assert isinstance(error, str) and "batch 1 of the torch DataLoader's batch_sampler holds 1 example(s)" in error
    assert "distribute_datasets_from_function" in error and "num_replicas=ctx.num_input_pipelines" in error


def test_sampled_batches_that_feed_every_replica_are_split(results):
    assert results["bucket_all_fed"] == [[2, 1], [1, 1], [2, 1]]


def test_torchs_batch_sampler_keeps_the_short_last_batch(results):
    assert results["torch_batch_sampler"] == [[1, 1], [1, 1], [1, 1], [1, 0]]
