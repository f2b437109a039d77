"""pytorch/examples programs typed as printed (``pyexamples2.py``, ``pyexamples2_more.py``) with the port's
changes (models and optimizers in ``strategy.scope()``, the loop body in ``strategy.run``, the data through
``experimental_distribute_dataset``) train on MirroredStrategy (2 logical CPUs) as DDP trains them on 2 Gloo
processes: the same weights, losses and logged numbers (float64; bit for bit here), every replica's copy
equal, or multidev refuses them saying why; under ``multidev launch --workers 2`` (MultiWorkerMirroredStrategy,
one replica a worker) those listed in ``ON_WORKERS`` give DDP's result too, the RL examples as printed included.

The MirroredStrategy cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched
workers in another, all started together (``pyexamples2_run.py``).
"""
from __future__ import annotations

import re

import pytest

from tests.programs.pyexamples2_run import ON_WORKERS
from tests.programs.test_pytutorials import run_three_ways

TIMEOUT_S = 240
# Both sides run the same ops on the same slices and average 2 gradients (exact in any order): 0.0 here;
# the margin is for another CPU's kernels.
TOLERANCE = 1e-10
EQUAL = ("reinforce_per_replica", "actor_critic_per_replica", "vae", "super_resolution", "super_resolution_state_dict",
         "siamese",
         "forward_forward", "gcn", "time_sequence_prediction", "regression", "cifar_trainer",
         "cifar_trainer_item_in_step")
CROSSED = r"Replica (\d)'s loss.backward\(\) reached replica (?!\1)(\d)'s copy of 'Linear\.\w+:0': its loss used a " \
          r"tensor that replica \2's forward computed"
REFUSED = {   # example -> (exception type, what its message must say)
    # policy.saved_log_probs / saved_actions and policy.rewards: one list for both replicas
    "reinforce": ("RuntimeError", "`policy.saved_log_probs[replica_id].append(...)`"),
    "actor_critic": ("RuntimeError", "`policy.saved_log_probs[replica_id].append(...)`"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "pyexamples2")
    assert sorted(loaded[0]) == sorted(loaded[1]) == sorted(EQUAL + tuple(REFUSED)), "every example is tested"
    return loaded, logs


def _flat(rows) -> list:
    return [x for row in rows for x in (_flat(row) if isinstance(row, list) else [row])]


def _ok(result: dict, log: str) -> dict:
    assert "error" not in result, (result["error"], log[-4000:])
    return result


def _same_as_ddp(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("example", EQUAL)
def test_example_trains_as_ddp(results, example):
    """The weights, the logged numbers (losses, PSNR, accuracies, LBFGS's closure losses, the clipped norms
    and OneCycleLR's rates, the running reward) are DDP's; super_resolution's ``torch.save(model, path)``
    (the whole module pickled) loads back with the trained weights, as DDP's ``model.module``. ``cifar_trainer_item_in_step``: the running loss
    the step adds ``loss.item()`` into is one number for both replicas, so it holds every replica's losses,
    the sum of DDP's ranks' running losses (each rank keeps its own)."""
    (ours, ddp, *_), log = results
    _same_as_ddp(_ok(ours[example], log), _ok(ddp[example], ""))


def test_batchnorm_statistics_read_outside_the_step_are_the_mean_of_the_replicas(results):
    """siamese_network calls its BatchNorm twice a step (``forward_once`` on each image): the running
    statistics read after training are the mean of the replicas' own, those of DDP's ranks without
    ``broadcast_buffers`` averaged (timm's ``distribute_bn``)."""
    (ours, ddp, *_), log = results
    got, theirs = _ok(ours["siamese"], log)["buffers"], ddp["siamese"]["buffers"]
    assert got == pytest.approx(theirs, rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("example", sorted(REFUSED))
def test_example_refused_saying_why(results, example):
    """reinforce.py and actor_critic.py keep the episode's log-probabilities and rewards in lists on the
    policy module, which every replica appends to (DDP: one list per process): refused in the first run,
    before a backward over another replica's tensors starts (``*_per_replica``, keyed by the replica id as
    the error says, trains as DDP)."""
    (ours, ddp, *_), log = results
    kind, says = REFUSED[example]
    error = ours[example].get("error", "")
    assert error.startswith(kind) and says in error, error
    if kind == "RuntimeError":
        assert re.search(CROSSED, error), error
    _ok(ddp[example], "")


@pytest.mark.parametrize("example", ON_WORKERS)
def test_example_under_multidev_launch_trains_as_ddp(results, example):
    """``multidev launch --workers 2``: both workers hold DDP's weights and log DDP's numbers; with one
    replica per process the RL examples' lists on the module are each worker's own, as each rank's."""
    (_, ddp, *workers), log = results
    first = _ok(workers[0][example], log)
    assert all(_ok(w[example], log)["params"] == first["params"] for w in workers), "every worker's"
    _same_as_ddp(first, ddp[example])
