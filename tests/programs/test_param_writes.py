"""Programs that write parameters, or change what is trained, outside ``optimizer.step()`` (``param_writes.py``,
``param_writes2.py``: WGAN clipping, max-norm, CLIP's logit-scale clamp, SwAV's prototypes, lottery-ticket
pruning, dead-unit re-initialisation, ULMFiT's gradual unfreezing, Lookahead and Polyak averaging by hand,
Neural Transfer's image as a module's parameter), inside the step and between steps, ported with two lines:
on MirroredStrategy (2 logical CPUs), CentralStorageStrategy (one shared copy) and ``multidev launch
--workers 2`` they give DDP's weights on 2 Gloo processes (float64), or are refused saying why.

The strategies' cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched
workers in another, all started together (``param_writes_run.py``)."""
from __future__ import annotations

import math

import pytest

from tests.programs.param_writes_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TIMEOUT_S = 240
TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged: 0.0 here (1e-15 for SwAV on one copy)
SHARED = "in place in several replicas: the step function reaches it from outside"
ONE_COPY = "keeps one copy that all 2 replicas share"
REFUSED = {   # program -> what the error says, on MirroredStrategy
    "lookahead_in_step": f"the tensor slow['fc1.bias'] {SHARED}",
    "polyak_plain_in_step": f"the tensor avg['fc1.bias'] {SHARED}",
}
# SwAV's write before the forward pass may also change the copy under the other replica's backward first:
# torch's RuntimeError then, with a note saying why (which comes first depends on the threads' timing).
UNDER_BACKWARD = "RuntimeError: one of the variables needed for gradient computation has been modified"
REFUSED_CENTRAL = {   # CentralStorageStrategy: in-place writes of its one copy, made by every replica
    **REFUSED,
    "maxnorm_in_step": ONE_COPY, "clip_logit_scale_in_step": ONE_COPY, "reinit_dead_in_step": ONE_COPY,
    "polyak_module_in_step": ONE_COPY,
    "neural_style_parameter": "LBFGS.step(closure) cannot run on CentralStorageStrategy",
    "swav_prototypes_in_step": ONE_COPY,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "param_writes")
    return loaded, logs


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)
    if "averaged" in theirs:
        assert got["averaged"] == pytest.approx(theirs["averaged"], rel=TOLERANCE, abs=TOLERANCE)


ALL = sorted(PROGRAMS)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    """Writes inside ``strategy.run`` reach the calling replica's copy (each rank's); a variable unfrozen in the
    step joins that step's reduction; a plain tensor of the program's that every replica writes is refused."""
    (ours, ddp, *_), log = results
    theirs, got = _ok(ddp[program], ""), ours[program]["mirrored"]
    if program in REFUSED:
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        return
    _equal(_ok(got, log), theirs)


@pytest.mark.parametrize("program", ALL)
def test_on_central_storage_as_ddp_or_refused(results, program):
    """One copy for both replicas: writes through ``.data`` that are idempotent (clipping, masks) give DDP's
    weights; an in-place write of the copy, which every replica makes, is refused (after the update: at the
    run's end; before it, as SwAV's: when replica 0 is about to apply it)."""
    (ours, ddp, *_), log = results
    theirs, got = _ok(ddp[program], ""), ours[program]["central"]
    if program in REFUSED_CENTRAL:
        error = got.get("error", "")
        if program == "swav_prototypes_in_step" and error.startswith(UNDER_BACKWARD):
            assert "keeps one copy of each variable that every replica reads" in log, log[-3000:]
            return
        assert error.startswith("ValueError") and REFUSED_CENTRAL[program] in error, got
        return
    _equal(_ok(got, log), theirs)


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp(results, program):
    """One replica per worker: each worker holds its own dicts and module, as each rank; unfreezing in the
    step reduces that step's gradients across the workers too."""
    (_, ddp, *workers), log = results
    first = _ok(workers[0][program], log)
    assert _ok(workers[1][program], log)["params"] == first["params"], "every worker's"
    _equal(first, ddp[program])


def test_the_writes_change_the_result(results):
    """The constraints bite (the comparisons above could not pass with the writes dropped): WGAN's clamp
    holds critic weights at the bound, CLIP's logit scale reaches log(100), and ULMFiT's optimizer ends
    with one group per layer group."""
    ddp = results[0][1]
    assert ddp["wgan_clip_in_step"]["clipped"] > 10
    assert max(ddp["clip_logit_scale_in_step"]["scales"]) == pytest.approx(math.log(100), abs=0)
    assert ddp["ulmfit_add_param_group_in_step"]["groups"] == ddp["ulmfit_add_param_group_between"]["groups"] == 3
    lookahead, plain = ddp["lookahead_in_step"]["params"], ddp["lookahead_between"]["params"]
    assert lookahead == pytest.approx(plain, abs=1e-12), "inside the step or between steps, the same program"
