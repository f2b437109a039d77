"""pytorch.org/tutorials typed as printed (``pytutorials.py`` ... ``pytutorials4.py``) with
the port's changes (models and optimizers in ``strategy.scope()``, the loop body in ``strategy.run``, the
data through ``experimental_distribute_dataset``) train on MirroredStrategy (2 logical CPUs) as DDP trains
them on 2 Gloo processes: the same weights, losses and logged numbers (float64; bit for bit here), every
replica's copy equal (``experimental_local_results``), or multidev refuses them saying why; under
``multidev launch --workers 2`` (MultiWorkerMirroredStrategy) those that train give DDP's result too.

All MirroredStrategy cases run in one fresh interpreter, the DDP ranks in one 2-process job and the
launched workers in another, all started together (``pytutorials_run.py``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.programs.pytutorials_run import ON_WORKERS
from tests.programs.test_programs import HERE, _finish, _free_port, _start

TIMEOUT_S = 240
# Both sides run the same ops on the same slices and average 2 gradients (exact in any order): 0.0 here;
# the margin is for another CPU's kernels.
TOLERANCE = 1e-10
EQUAL = ("transfer_finetune", "transfer_fixed_feature_extractor", "cifar10_classifier", "spatial_transformer",
         "fgsm_autograd_grad", "dqn", "dqn_update_in_run", "transformer_lm", "legendre_module",
         "polynomial_sequential", "mnist_logistic", "seq2seq_translation")
REFUSED = {   # tutorial -> (exception type, what its message must say)
    "fgsm": ("AbortedError", "torch.autograd.grad(loss, data)"),   # `continue` before backward on one replica
    "neural_style": ("ValueError", "LBFGS.step() inside MirroredStrategy.run would update tensors"),
    "legendre_free_tensors": ("ValueError", "loss.backward() inside MirroredStrategy.run would accumulate into tensors"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "pytutorials")
    assert sorted(loaded[0]) == sorted(loaded[1]) == sorted(EQUAL + tuple(REFUSED)), "every tutorial is tested"
    return loaded, logs


def _launch(out: str, script: str = "pytutorials_run.py") -> subprocess.Popen:
    """``multidev launch --workers 2 SCRIPT OUT`` (MultiWorkerMirroredStrategy, 1 replica a worker)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for name in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2",
                             os.path.join(HERE, script), out], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_three_ways(tmp_path_factory, stem: str, timeout_s: float = TIMEOUT_S) -> tuple[list, str]:
    """Run ``{stem}_run.py`` as MirroredStrategy on 2 logical CPUs, as 2 DDP ranks on Gloo and under
    ``multidev launch --workers 2``, together; each writes ``{stem}_<way>.json``. Returns the results
    (multidev, ddp, worker0, worker1) and the MirroredStrategy and launcher logs."""
    out = str(tmp_path_factory.mktemp(stem))
    script, port = f"{stem}_run.py", str(_free_port())
    procs = [_start(script, out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start(script, out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port) for r in range(2)]
    procs.append(_launch(out, script))
    logs = _finish(procs, timeout_s)
    failed = [(p.returncode, log[-4000:]) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    loaded = []
    for way in ("multidev", "ddp", "worker0", "worker1"):
        with open(os.path.join(out, f"{stem}_{way}.json")) as f:
            loaded.append(json.load(f))
    return loaded, logs[0] + logs[3]


def _flat(rows) -> list:
    return [x for row in rows for x in (_flat(row) if isinstance(row, list) else [row])]


def _ok(result: dict, log: str) -> dict:
    assert "error" not in result, (result["error"], log[-4000:])
    return result


@pytest.mark.parametrize("tutorial", EQUAL)
def test_tutorial_trains_as_ddp(results, tutorial):
    (ours, ddp, *_), log = results
    got, theirs = _ok(ours[tutorial], log), _ok(ddp[tutorial], "")
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("tutorial", ["transfer_finetune", "transfer_fixed_feature_extractor"])
def test_best_weights_are_a_snapshot(results, tutorial):
    """``copy.deepcopy(model.state_dict())`` (and ``torch.save`` of it) at the best validation accuracy is
    a snapshot: ``load_state_dict`` at the end brings back weights the later epochs had moved (DDP's), and
    the predictions after loading (outside ``strategy.run``) are DDP's."""
    (ours, ddp, *_), log = results
    got, theirs = _ok(ours[tutorial], log), ddp[tutorial]
    assert max(abs(x - y) for x, y in zip(got["trained"], got["params"])) > 1e-3, "the best epoch was not the last"
    assert got["trained"] == pytest.approx(theirs["trained"], rel=TOLERANCE, abs=TOLERANCE)
    assert got["outputs"] == pytest.approx(theirs["outputs"], rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("tutorial", sorted(REFUSED))
def test_tutorial_refused_saying_why(results, tutorial):
    """FGSM as printed skips the backward on a replica whose first prediction is wrong (``continue``):
    the other replica's backward reduces the model's gradients and would wait for it, as a DDP rank of a
    wrapped model would; the error names ``torch.autograd.grad`` (``fgsm_autograd_grad`` trains as DDP
    with it). Neural Transfer's input image is a plain tensor that LBFGS would have both replicas update:
    refused before the closure's first backward. "Learning PyTorch with Examples"' free tensors a, b, c, d
    updated by hand: refused at the backward that reaches them from a second replica. DDP runs all three
    (the attacked model is not wrapped; nothing reduces the free tensors: each rank trains on its half)."""
    (ours, ddp, *_), log = results
    kind, says = REFUSED[tutorial]
    error = ours[tutorial].get("error", "")
    assert error.startswith(kind) and says in error, error
    _ok(ddp[tutorial], "")


@pytest.mark.parametrize("tutorial", [t for t in ON_WORKERS if t != "fgsm"])
def test_tutorial_under_multidev_launch_trains_as_ddp(results, tutorial):
    """``multidev launch --workers 2``: both workers hold DDP's weights and log DDP's numbers (Neural
    Transfer too: one replica per worker has the plain image to itself, as each DDP rank has)."""
    (_, ddp, *workers), log = results
    first = _ok(workers[0][tutorial], log)
    assert all(_ok(w[tutorial], log)["params"] == first["params"] for w in workers), "every worker's"
    assert first["spread"] == 0.0
    assert max(abs(x - y) for x, y in zip(first["params"], ddp[tutorial]["params"])) <= TOLERANCE
    assert _flat(first["log"]) == pytest.approx(_flat(ddp[tutorial]["log"]), rel=TOLERANCE, abs=TOLERANCE)


def test_fgsm_as_printed_under_multidev_launch_is_refused(results):
    """Worker 0 skips the backward that worker 1's all-reduce waits in: both raise the collective mismatch
    (the next all-reduce of one meets the gradients' of the other), at once, naming the branch to look for."""
    (*_, w0, w1), log = results
    for result in (w0["fgsm"], w1["fgsm"]):
        error = result.get("error", "")
        assert error.startswith("InvalidArgumentError") and "Collective mismatch across workers" in error, (error, log[-3000:])
        assert "branch that depends on the worker" in error
