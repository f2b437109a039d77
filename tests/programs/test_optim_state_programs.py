"""Optimizer state written between epochs (momentum resets on a subclass of SGD, Lion, LARS; Adam's moments
halved; the state dropped; a second optimizer), gradients by other routes (a penalty on the parameters' gradient
norm through ``torch.autograd.grad(create_graph=True)``, ``torch.autograd.backward`` of two losses, a weighted
non-scalar backward, updates through ``vector_to_parameters``) and ``ParameterDict`` models, inf-norm clipping and
cyclic schedules (``optim_state_programs.py``), ported with two lines: on MirroredStrategy (2 logical CPUs) and
``multidev launch --workers 2`` they give DDP's weights and logged losses on 2 Gloo processes (float64).

Before the fix in ``optimizer_hooks`` (an entry's signature), a momentum reset between epochs reached replica
0's state only where the other replicas keep copies (an optimizer updated on every replica: a subclass, Lion,
LARS; every optimizer on GPUs): the replicas drifted apart. Before ``replica_state``, moments halved inside
the step were halved once per replica (a split update) or on replica 0 alone (Lion). The strategy's cases run in one fresh interpreter,
the DDP ranks in one 2-process job and the launched workers in another, all started together."""
from __future__ import annotations

import pytest

from tests.programs.optim_state_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged
ALL = sorted(PROGRAMS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "optim_state")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp(results, program):
    (ours, ddp, *_), log = results
    _equal(_ok(ours[program], log), _ok(ddp[program], ""))


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _equal(_ok(worker[program], log), _ok(ddp[program], ""))
    assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_the_state_writes_changed_the_training(results):
    """The references: DDP's runs with a write between epochs end elsewhere than the same run without it."""
    ddp = results[0][1]
    for program in ("momentum_reset_lion", "momentum_scaled_lars", "adam_moments_halved", "state_dropped_lion",
                    "own_attribute_state_reset"):
        assert ddp[program]["log"][-1] != ddp[f"{program}_unwritten"]["log"][-1], program
