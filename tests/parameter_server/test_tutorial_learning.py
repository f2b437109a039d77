"""TF's parameter-server tutorial, custom loop: on one worker its steps equal the same steps run locally.

The full tutorial (2 workers, 2 ps, accuracy and evaluation) runs in tests/examples/test_tutorials.py.
Here the tutorial's model, RMSprop(0.1) and regularized loss train for 20 steps through the
coordinator on one worker and two parameter servers (the embedding split in two shards): each
step's loss and the final weights equal a local run of the same steps from the same initial
weights. TensorFlow 2.21 gives, for this program on one device with the same initial weights and
batches, the same loss curve as multidev (0.683, 3.26, 923, 448, 102, then 0.0638 falling to 0.0629).
"""

from __future__ import annotations

import pytest

from tests.parameter_server._cluster import describe, result_json, run_cluster
from tests.parameter_server._tutorial_scripts import TUTORIAL_ONE_WORKER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_one_worker_equals_local_training_and_learns():
    results = run_cluster(TUTORIAL_ONE_WORKER, workers=1, ps=2, timeout=200)
    assert results["chief:0"].returncode == 0, describe(results)
    out = result_json(results["chief:0"])
    assert out["shards"] == [[4, 16384], [4, 16384]]
    assert out["ps_losses"] == pytest.approx(out["local_losses"], rel=1e-4, abs=1e-6)
    assert out["max_weight_diff"] < 1e-4, out["max_weight_diff"]
    assert out["ps_losses"][-1] < 0.1 < 0.6 < out["ps_losses"][0], out["ps_losses"]     # it learns
    assert all("pipe closed" not in r.stderr for r in results.values()), describe(results)
