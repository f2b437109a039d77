"""Tensors a module stores on itself inside ``strategy.run``, and its ``training`` flag, are kept per
replica, as each DDP rank keeps its own module (``multidev/distribute/replica_attributes.py``). The program
runs in one fresh interpreter; each case widens the race on purpose (replica 0 lingers between its write
and its read), so the old code, where the replicas shared the module's ``__dict__``, fails every case: a
stateful RNN trained 0.011 off DDP silently, as did TRADES-style ``model.eval()`` / ``model.train()``
inside the step (0.0007); a hidden tensor read by the loss and the legacy transforms were refused."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(__file__), "_replica_attributes_program.py")


@pytest.fixture(scope="module")
def results():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_legacy_weight_norm_spectral_norm_and_prune_train_as_one_device(results):
    r = results["legacy_transforms"]
    assert "error" not in r, r
    assert r["trained"] < 1e-12 and r["removed"] < 1e-12, r
    assert r["removed_keys"] == ["0.bias", "0.weight", "2.bias", "2.weight", "4.bias", "4.weight", "6.bias",
                                 "6.weight"]
    assert r["weight_readable"] == [8, 16]


def test_a_tensor_kept_for_the_loss_is_the_replicas_own(results):
    r = results["hidden_read_by_the_loss"]
    assert "error" not in r, r
    assert r["diff"] < 1e-12, r
    # outside the run: replica 0's tensor, as rank 0's script sees its own; a write there reaches every replica
    assert r["outside_shape"] == [4, 6] and r["outside_is_replica_0s"], r
    assert r["reset_seen"] and r["in_dict"], r


def test_state_carried_from_batch_to_batch_continues_per_replica_as_ddp_ranks(results):
    r = results["state_carried_per_replica"]
    assert "error" not in r, r
    assert max(r["diffs"]) < 1e-12 and r["state_diff"] < 1e-12, r


def test_eval_and_train_inside_the_step_switch_only_the_replicas_own_mode(results):
    r = results["mode_switched_inside_the_step"]
    assert "error" not in r, r
    assert r["diff"] < 1e-12 and r["after"] and r["eval_everywhere"], r


def test_numbers_written_in_forward_advance_once_per_replica_as_per_rank(results):
    r = results["numbers_advance_once_per_replica"]
    assert "error" not in r, r
    assert r["diff"] < 1e-12, r
    assert [r["calls"], r["tau"]] == r["reference"] == [4, 0.5], r
    assert r["inside"] == [[4.0, 0.5], [4.0, 0.5]], r


def test_del_in_a_replica_deletes_its_own_value(results):
    assert results["deleted_per_replica"] == {"seen": [[True, True], [True, False]], "outside": True,
                                              "after_del": False}


def test_a_plain_module_between_runs_and_when_no_strategy_lives(results):
    assert results["plain_module_between_runs"] == {"inside": [False], "between": True, "getattr_is_torchs": True,
                                                    "kept": True}
