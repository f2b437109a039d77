"""A flag (``bool``) a module writes in its ``train()`` / ``eval()`` inside ``strategy.run`` is the writing
replica's own, as each DDP rank keeps its own module (``multidev/distribute/replica_attributes.py``).
loralib's ``Linear`` merges its low-rank update into the frozen weight in ``train(False)`` under
``if not self.merged``: with one flag shared by the replicas, ``model.eval()`` inside the step merged replica
0's copy only (replica 1 saw ``merged`` already True): refused after the first run as copies that differ, and
silently off DDP when the evaluation came after the first run. Other flags stay shared (one-time guards).
The program runs in one fresh interpreter with the order fixed (replica 1 waits for replica 0's switch)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(__file__), "_replica_flags_program.py")


@pytest.fixture(scope="module")
def results():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_loralib_merges_in_eval_inside_the_step_on_every_replica_as_one_device(results):
    r = results["lora_merged_in_eval_inside_the_step"]
    assert "error" not in r, r
    assert r["diff"] < 1e-12 and r["loss_diff"] < 1e-12, r
    assert r["merged"] == [True, True], "outside the run: replica 0's flag"
    assert r["unmerged_diff"] < 1e-12, "model.train() outside the run unmerged every replica's copy"


def test_a_flag_written_in_forward_stays_one_for_every_replica(results):
    """A one-time guard of work on the shared module object (transformers' hooks for ``output_router_logits``):
    per replica, every replica installed the hooks again (Mixtral's auxiliary loss then counted each expert's
    router logits twice: 0.009 off DDP's weights)."""
    r = results["a_flag_written_in_forward_stays_shared"]
    assert "error" not in r, r
    assert r == {"hooks": 1, "flag": True}, r


def test_a_reset_between_runs_reaches_every_replica(results):
    """A write between runs is every rank's: it replaced the replicas' values only when it was not the very
    object replica 0 showed (``0``: replica 1 kept its ``5``, silently)."""
    r = results["a_reset_between_runs_reaches_every_replica"]
    assert "error" not in r, r
    assert r["before"] == [0.0, 5.0] and r["after"] == [0.0, 0.0], r
