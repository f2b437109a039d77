"""``evaluate`` (and ``fit`` without ``steps_per_epoch``) on 2 workers give TF 2.21's numbers for each
auto-shard policy (``_mw_evaluate_program.py``; TF's side recorded by ``record_mw_evaluate.py`` into
``mw_evaluate_tf.json``, tf-keras 2 as for the tutorials).

With OFF each worker evaluates its own stream, rebatched to ``batch / workers``, for as many steps as
the dataset has batches (TF infers them before distributing it): here each worker's examples 0-5 of
its own 10, summed over both workers. multidev sliced each worker's batch as a global batch instead
(a loss over half the rows), and read the whole stream in ``fit``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.multiworker._cluster import launch_program

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.timeout(200)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    got = launch_program(os.path.join(HERE, "_mw_evaluate_program.py"), tmp_path_factory.mktemp("mw_evaluate"))
    with open(os.path.join(HERE, "mw_evaluate_tf.json")) as f:
        return got, json.load(f)["workers"]


@pytest.mark.parametrize("worker", [0, 1])
@pytest.mark.parametrize("policy", ["OFF", "DATA", "AUTO"])
def test_evaluate_gives_tf_logs_and_batches(runs, worker, policy):
    got, want = runs[0][worker][policy], runs[1][worker][policy]
    assert got["batches"] == want["batches"]
    assert sorted(got["logs"]) == sorted(want["logs"])
    for key in want["logs"]:
        np.testing.assert_allclose(got["logs"][key], want["logs"][key], rtol=1e-5, err_msg=key)


@pytest.mark.parametrize("worker", [0, 1])
def test_fit_on_off_sharded_data_takes_the_datasets_number_of_steps(runs, worker):
    got, want = runs[0][worker]["fit_OFF"], runs[1][worker]["fit_OFF"]
    assert got["batches"] == want["batches"] == 3
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
    np.testing.assert_allclose(got["kernel"], want["kernel"], rtol=1e-5)
