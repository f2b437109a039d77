"""Reinforcement- and meta-learning programs as printed (``rl_programs.py``: cleanrl's PPO;
``rl_programs2.py``: cleanrl's SAC with entropy autotuning, Reptile and first-order MAML on sine waves),
ported with two lines, each replica (rank) with its own environments, replay buffer or tasks: on
MirroredStrategy (2 logical CPUs) and ``multidev launch --workers 2`` they give DDP's weights and logged
numbers on 2 Gloo processes (float64), or are refused saying why.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched
workers in another, all started together (``rl_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.rl_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same numbers, 2 gradients averaged: 0.0 here
ALL = sorted(PROGRAMS)
# program -> the DDP program it must equal (the same program where omitted)
AS_DDP = {"ppo": "ppo", "ppo_lr_in_step": "ppo", "ppo_via_method": "ppo", "sac_md_variable": "sac_md_variable",
          "reptile_grad": "reptile_grad", "fomaml_grad": "fomaml_grad"}
ALPHA = "writes the enclosing function's variable 'alpha' (now 1.0) inside strategy.run on several replicas: " \
        "replicas are threads sharing that one variable (each DDP rank has its own), so `alpha = ...` in one replica"
REFUSED = {   # program -> what the ValueError says, on MirroredStrategy
    "sac_as_printed": ALPHA,
    "sac_free_log_alpha": ("Adam.step() inside MirroredStrategy.run would update tensors (shapes [(1,)]) that are "
                           "not mirrored", "make a free-standing weight an md.Variable(...) created in the scope"),
    "sac_targets_outside_scope": "the tensor qf1_target.",
    "reptile_data": "Reptile's `p.data.add_(...)`): set `p.grad = ...` instead",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "rl")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL
    assert sorted(AS_DDP) + sorted(REFUSED) and set(AS_DDP) | set(REFUSED) == set(ALL)


@pytest.mark.parametrize("program", sorted(AS_DDP))
def test_on_mirrored_strategy_as_ddp(results, program):
    (ours, ddp, *_), log = results
    _equal(_ok(ours[program], log), _ok(ddp[AS_DDP[program]], ""))


@pytest.mark.parametrize("program", sorted(REFUSED))
def test_on_mirrored_strategy_refused_saying_why(results, program):
    (ours, *_), _ = results
    error, says = ours[program].get("error", ""), REFUSED[program]
    says = (says,) if isinstance(says, str) else says
    assert error.startswith("ValueError") and all(part in error for part in says), error


@pytest.mark.parametrize("program", sorted(AS_DDP))
def test_under_multidev_launch_as_ddp(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _equal(_ok(worker[program], log), _ok(ddp[AS_DDP[program]], ""))
    assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_what_ddp_does(results):
    """DDP's side of the refusals: each rank trains its free ``log_alpha`` on its own half (nothing
    reduces it: rank 0's alpha is not the port's); targets outside any scope are each rank's own (DDP's
    result is the port's); Reptile's ``p.data.add_`` by each rank leaves the ranks apart."""
    ddp = results[0][1]
    assert _flat(ddp["sac_as_printed"]["log"]) != pytest.approx(_flat(ddp["sac_md_variable"]["log"]), abs=1e-9)
    assert ddp["sac_targets_outside_scope"]["params"] == ddp["sac_md_variable"]["params"]
    assert ddp["reptile_data"]["spread"] > 1e-3


def test_the_refused_programs_under_multidev_launch(results):
    """One replica per worker holds its own Python numbers, plain tensors and modules, as each rank: SAC as
    printed, with its free ``log_alpha``, and its targets outside the scope give DDP's result (each
    worker's ``log_alpha`` its own, as each rank's); Reptile's ``p.data.add_`` leaves the workers' copies apart: refused after the first run."""
    (_, ddp, *workers), log = results
    for worker in workers:
        for program in ("sac_as_printed", "sac_free_log_alpha", "sac_targets_outside_scope"):
            got, theirs = _ok(worker[program], log), ddp[program]
            assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE, program
        error = worker["reptile_data"].get("error", "")
        assert error.startswith("ValueError") and REFUSED["reptile_data"] in error, error
