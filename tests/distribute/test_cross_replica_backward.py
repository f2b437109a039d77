"""``loss.backward()`` outside ``strategy.run`` over a model built in the scope: each DDP rank runs such a pass
itself and reads the gradient in its own ``p.grad``. Outside runs an op sees the variable itself, so the
gradient went into the variable's own autograd slot, which ``p.grad`` (the replicas' copies) does not show:
EWC's Fisher pass as printed (``if p.grad is not None: fisher[n] += p.grad.data ** 2``) found no gradient and
trained without its penalty, silently; a gradient probe between steps raised ``AttributeError`` on
``p.grad ** 2``, and with ``zero_grad(set_to_none=False)`` the probe's gradient never reached the next step
(0.07 off one device, silently). Now it reaches every replica's copy (``values/cross_replica_grads.py``)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(__file__), "_cross_replica_backward_program.py")


@pytest.fixture(scope="module")
def results():
    proc = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r}, run_name='__main__')", timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ewc_fisher_pass_outside_the_run_trains_as_one_device(results):
    r = results["ewc_fisher_outside_the_run"]
    assert "error" not in r, r
    assert r["fisher"] > 0.01 and r["diff"] < 1e-12, r


def test_gradient_probe_between_steps_reads_and_keeps_the_gradient_as_one_device(results):
    r = results["gradient_probe_between_steps"]
    assert "error" not in r, r
    assert r["diff"] < 1e-12, r


def test_every_replica_sees_the_outside_gradient_and_setting_none_discards_it(results):
    r = results["every_replica_sees_the_gradient_and_none_discards_it"]
    assert "error" not in r, r
    assert r["inside"] == [0.0, 0.0] and r["gone"] == [True, True], r
