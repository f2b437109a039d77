"""TF's parameter-server tutorial, custom loop (issue 17 #10-#11), on a chief + 2 workers + 2 ps cluster.

TensorFlow 2.21 prints, for the same program: epoch accuracy read by the coordinator rising to 1.0
(0.63 after the first epoch on its data), a distributed evaluation that counts 16 examples, and an
embedding layer whose ``.weights`` are 2 shards of (4, 16384) on ``/job:ps/replica:0/task:0`` and
``task:1``.
"""

from __future__ import annotations

import pytest

from tests.parameter_server._cluster import describe, result_json, run_cluster
from tests.parameter_server._tutorial_scripts import TUTORIAL_METRICS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def tutorial():
    results = run_cluster(TUTORIAL_METRICS, workers=2, ps=2, timeout=200)
    assert results["chief:0"].returncode == 0, describe(results)
    return result_json(results["chief:0"])


def test_metrics_updated_on_workers_are_read_by_the_coordinator(tutorial):
    assert tutorial["metric_on_ps"] == "PSVariable"
    # every scheduled step's updates reach the coordinator: 5 steps x 16 examples per epoch, after a reset
    assert tutorial["epoch_counts"] == [80.0] * 4
    assert tutorial["epoch_examples"] == [80.0] * 4
    assert 0.0 < tutorial["epoch_accuracy"][0] <= 1.0          # multidev read 0.0 before
    assert tutorial["epoch_accuracy"][-1] == 1.0, tutorial       # the task is learnt, as in TF's run


def test_distributed_evaluation_counts_sixteen_examples(tutorial):
    assert tutorial["eval_count"] == 16.0                        # TF: 16; multidev read 0 before
    assert tutorial["eval_total"] == tutorial["local_correct"]   # the same predictions, summed over workers
    assert tutorial["eval_accuracy"] == tutorial["local_correct"] / 16


def test_sharded_embedding_lists_one_weight_per_shard_with_its_ps_device(tutorial):
    assert tutorial["num_weights"] == 2
    assert tutorial["shards"] == [
        {"shape": [4, 16384], "device": "/job:ps/replica:0/task:0/device:CPU:0"},
        {"shape": [4, 16384], "device": "/job:ps/replica:0/task:1/device:CPU:0"},
    ]
    assert tutorial["count_params"] == 8 * 16384
    assert tutorial["got_weights"] == [[4, 16384], [4, 16384]]
    assert tutorial["rows_after_set"] == [[0.5, 0.5], [-0.5, -0.5]]      # set_weights per shard reached the ps
