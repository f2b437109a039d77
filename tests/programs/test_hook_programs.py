"""Module hooks and custom autograd as public programs write them (``hook_programs.py``, ``hook_programs2.py``),
ported with two lines: on MirroredStrategy (2 logical CPUs) and ``multidev launch --workers 2`` they give DDP's
weights and logged values on 2 Gloo processes (float64), or are refused saying why.

Refused: a forward or backward hook storing a tensor in a dict (or a plain object) that every replica shares
(the replicas are threads; each DDP rank has its own dict): which replica's tensor the loss read depended on
the threads' timing. Keyed by replica, the same programs give DDP's numbers. The strategy's cases run in one
fresh interpreter, the DDP ranks in one 2-process job and the launched workers in another, all started
together (``hook_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.hook_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged
SHARED = "of one strategy.run: the replicas are threads of one process sharing that Python object"
REFUSED = {   # program -> what the error names (on one worker of one replica nothing is shared: DDP's numbers)
    "activation_dict_penalty": "stored a tensor in activation['tanh']",
    "fitnets_hint_dict": "stored a tensor in features['",
    "save_features_object": "stored a tensor in the SaveFeatures object's attribute 'features'",
    "gradcam_dicts": "stored a tensor in activations['fc1']",
    "dann_reversed_gradient_logged": "stored a tensor in grad_log.append(...)",
}
ALL = sorted(PROGRAMS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "hook")


def _equal(got: dict, theirs: dict, rank0: bool = True) -> None:
    """``norms`` are one rank's (worker's) own: compared where ``got`` is rank 0's."""
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    for key in ("log", "norms") if rank0 else ("log",):
        assert _flat(got.get(key, [])) == pytest.approx(_flat(theirs.get(key, [])), rel=TOLERANCE, abs=TOLERANCE)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    (ours, ddp, *_), log = results
    got = ours[program]
    if program in REFUSED:
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        assert SHARED in got["error"] and "replica_id_in_sync_group" in got["error"]
        return
    _equal(_ok(got, log), _ok(ddp[program], ""))


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp(results, program):
    """One replica per worker: each worker's dict is its own, as each DDP rank's (nothing is refused)."""
    (_, ddp, *workers), log = results
    for index, worker in enumerate(workers):
        _equal(_ok(worker[program], log), _ok(ddp[program], ""), rank0=index == 0)
    assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_keyed_by_replica_is_the_unkeyed_ddp_program(results):
    """The port (one slot per replica) changes nothing under DDP: each rank has one slot."""
    ddp = results[0][1]
    for program in ("activation_dict", "fitnets_hint", "gradcam"):
        plain = ddp[program + ("_penalty" if program == "activation_dict" else "_dicts" if program == "gradcam"
                               else "_dict")]
        assert _ok(plain, "")["params"] == ddp[program + "_keyed_by_replica"]["params"]
