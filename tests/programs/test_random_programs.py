"""Randomness in the step, as public programs print it (``random_programs.py``, ``random_programs2.py``): timm's
drop_path and torchvision's stochastic_depth, ``F.gumbel_softmax(hard=True)``, ``torch.multinomial`` and
``Categorical.sample``, Hugging Face's MLM masking, ``randn_like`` noise, ``torch.distributions`` rsample,
MixUp's ``np.random.beta`` with ``torch.randperm``, CutMix, teacher forcing by ``random.random()``,
``random.choice`` of an augmentation, a program's ``torch.Generator``, ``seed + rank``, ``fork_rng``, and
gradient noise drawn by hooks in backward. Ported with two lines, on MirroredStrategy (2 logical CPUs) and
``multidev launch --workers 2`` they give the weights, losses and draws after training of DDP on 2 Gloo
processes seeded alike (float64).

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``random_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.random_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged: 0.0 here
ALL = sorted(PROGRAMS)
# Refused on MirroredStrategy (replica threads share the object); one replica per worker holds its own.
REFUSED = {"generator_reseeded_in_step": "was re-seeded or had its state set (g.manual_seed / g.set_state"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "random")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    for key in ("log", "after"):
        assert _flat([got.get(key, [])]) == pytest.approx(_flat([theirs.get(key, [])]), rel=TOLERANCE, abs=TOLERANCE)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    """A program's generator re-seeded in the step is refused (torch's Generator methods cannot be routed to
    each replica's copy); every other program gives DDP's numbers."""
    (ours, ddp, *_), log = results
    if program in REFUSED:
        assert ours[program].get("error", "").startswith("ValueError") and REFUSED[program] in ours[program]["error"]
        return
    _equal(_ok(ours[program], log), _ok(ddp[program], ""))


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _equal(_ok(worker[program], log), _ok(ddp[program], ""))
