"""Numbers a step function writes into ``optimizer.param_groups`` inside ``strategy.run`` are each replica's
own, as each DDP rank's optimizer is (``multidev/distribute/replica_hyperparameters.py``). The program runs
in one fresh interpreter against the same program on one device over the global batch. On the old code,
where the replicas shared the group dicts, ``group["lr"] *= 0.5`` ran once per replica: every case below but
the warm-up (an assignment) trained silently off (0.01 to 0.15 in the weights after 4 steps)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(__file__), "_replica_hyperparameters_program.py")
TRAINED = ["decay_after_step", "decay_before_step_in_place", "warm_up_assigned", "new_key_counted_per_replica",
           "adam_two_groups", "written_between_runs", "after_load_state_dict", "scheduler_beside_hand_written",
           "tensor_rate_decayed", "tensor_rate_filled_in_place"]


@pytest.fixture(scope="module")
def results():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", TRAINED)
def test_hyperparameters_written_in_the_step_train_as_one_device(results, name):
    r = results[name]
    assert "error" not in r, r
    assert r["diff"] < 1e-12, r
    assert r["read"] == r["reference"], r          # the group after the runs: every rank's value
    assert r["seen"] == r["seen_reference"], r     # each replica read its own value in the step


def test_replicas_writing_different_values_are_refused_after_the_run(results):
    for name, key, shown in (("different_values_refused", "lr", "[0.1, 0.2]"),
                             ("different_tensors_refused", "momentum", "[0.5, 0.75]")):
        r = results[name]
        assert r["error"] and f"SGD.param_groups[0][{key!r}]: {shown}" in r["error"], r
        assert "outside strategy.run" in r["error"] and r["next_run_ok"], r
        assert r["after"][0] == pytest.approx(0.1), r   # replica 0's value, as rank 0's


def test_groups_stay_dicts_for_torch(results):
    r = results["group_types"]
    assert r == {"user": "ReplicaGroup", "packed": "dict", "weights_only_load": 0.1, "deepcopied": "ReplicaGroup"}
