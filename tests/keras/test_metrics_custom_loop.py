"""Keras metrics updated inside ``strategy.run`` (custom loops), as TensorFlow's sync-on-read metric
variables behave: each replica keeps its own state (its ``result()`` reads only its own updates), a
cross-replica read sums every replica's state in, and with several workers every worker's."""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import metrics


@pytest.fixture
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _barrier():
    md.distribute.get_replica_context().all_reduce("SUM", torch.tensor(1.0))


def test_a_replica_reads_its_own_state_and_cross_replica_reads_the_sum(strategy):
    with strategy.scope():
        mean = metrics.Mean()

    def step():
        r = md.distribute.get_replica_context().replica_id_in_sync_group
        mean.update_state(torch.full((r + 1,), float(r)))     # replica 0: [0]; replica 1: [1, 1]
        _barrier()                                             # both updated before either reads
        return mean.result()

    per_replica = strategy.experimental_local_results(strategy.run(step))
    assert [float(v) for v in per_replica] == [0.0, 1.0]      # TF: a replica reads its local value
    assert float(mean.result()) == pytest.approx(2 / 3)       # cross-replica: (0 + 1 + 1) / 3
    assert float(mean.count) == 3.0


def test_concurrent_replica_updates_lose_nothing(strategy):
    with strategy.scope():
        total = metrics.Sum()
        acc = metrics.SparseCategoricalAccuracy()
        auc = metrics.AUC(num_thresholds=11)
    y = np.array([0, 1, 1, 0])
    p = np.eye(2, dtype="float32")[[0, 1, 0, 0]]

    def step():
        for _ in range(50):
            total.update_state(torch.ones(3))
            acc.update_state(y, p)
            auc.update_state(y, p[:, 1])

    for _ in range(4):
        strategy.run(step)
    assert float(total.result()) == 4 * 2 * 50 * 3            # exact: no update lost to a race
    assert float(acc.result()) == pytest.approx(0.75)
    whole = metrics.AUC(num_thresholds=11)
    whole.update_state(y, p[:, 1])
    assert float(auc.result()) == pytest.approx(float(whole.result()))
    assert float(auc.true_positives.sum()) == 4 * 2 * 50 * float(whole.true_positives.sum())


def test_reset_in_cross_replica_context_drops_every_replicas_state(strategy):
    with strategy.scope():
        mean = metrics.Mean()
    strategy.run(lambda: mean.update_state(torch.tensor([5.0])))
    mean.reset_state()
    assert float(mean.count) == 0.0
    strategy.run(lambda: mean.update_state(torch.tensor([1.0])))
    assert float(mean.result()) == 1.0 and float(mean.count) == 2.0


def test_cross_replica_read_sums_across_workers(strategy, pretend_workers, monkeypatch):
    with strategy.scope():
        mean = metrics.Mean()
    pretend_workers(strategy, 2, 0)
    sums = []

    def sum_with_an_identical_worker(tensor):
        sums.append(tensor.numel())
        return tensor * 2

    monkeypatch.setattr(strategy.extended.worker_collective, "sum", sum_with_an_identical_worker)
    strategy.run(lambda: mean.update_state(torch.tensor([3.0])))
    assert float(mean.count) == 4.0 and float(mean.result()) == 3.0   # 2 replicas x 2 workers
    assert sums == [2]                                                  # one all-reduce, then read locally
    mean.result()
    assert sums == [2]


def test_metric_outside_any_strategy_is_unchanged():
    mean = metrics.Mean()
    mean.update_state([1.0, 3.0])
    assert float(mean.result()) == 2.0
