"""A module hook storing a tensor in a dict or object every replica shares is refused, whatever the threads'
timing (``multidev/distribute/hook_state.py``); a list made in ``forward`` (``self.features = []``) is each
replica's own (``replica_attributes.py``). The program runs in one fresh interpreter and makes the replicas
overlap on purpose; on the old code a teacher's features under ``no_grad`` trained 0.06 to 0.10 off one
device and Grad-CAM's stored gradient was the other replica's (0.61 off), silently, and the list made in
``forward`` held the other replica's features."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(__file__), "_hook_state_program.py")


@pytest.fixture(scope="module")
def results():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=240,
                     env={"MULTIDEV_LOGICAL_CPUS": ""})
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case, slot", [("teacher_features_in_a_shared_dict", "features['t']"),
                                        ("gradcam_gradients_in_a_shared_dict", "gradients['h']"),
                                        ("tensor_hook_gradient_in_a_shared_dict", "grads['h']")])
def test_a_hook_writing_a_shared_dict_is_refused(results, case, slot):
    error = results[case].get("error", "")
    assert error.startswith("ValueError") and f"stored a tensor in {slot}" in error, results[case]
    assert "replica_id_in_sync_group" in error and "multidev launch" in error


def test_keyed_by_replica_trains_as_one_device(results):
    r = results["teacher_features_keyed_by_replica"]
    assert "error" not in r and r["diff"] < 1e-12, r


def test_hooks_outside_runs_are_not_checked(results):
    assert results["gradcam_outside_runs_is_not_refused"] == {"shape": [8, 6]}


def test_a_list_made_in_forward_is_each_replicas_own(results):
    r = results["features_list_made_in_forward"]
    assert "error" not in r and r["diff"] < 1e-12, r
    assert r["lists"] == [2, "list"], "outside the run: replica 0's list"


def test_a_tensor_hook_keeping_its_log_per_replica_passes(results):
    assert results["tensor_hook_norm_log_keyed_by_replica"] == {"lengths": [1, 1]}
