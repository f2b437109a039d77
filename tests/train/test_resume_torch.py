"""Saving and resuming a PyTorch-style program gives the uninterrupted run's result, on and across
strategies: PyTorch's "Saving and loading a general checkpoint" recipe (``torch.save`` of the
state dicts, ``torch.load(PATH, weights_only=True)``, a relative PATH) and ``md.train.Checkpoint`` of
the same objects (torch Adam, StepLR, GradScaler, AveragedModel, the default generator, the
distributed iterator), 2 replicas -> 1 device -> 2 replicas -> MultiWorkerMirroredStrategy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(HERE, "resume_recipe.py")

IN_PROCESS = """
import json, os, shutil, sys
sys.path.insert(0, {here!r})
import multidev as md
import resume_recipe as R, resume_idioms as I

def phase(directory, *args, **kwargs):
    os.makedirs(directory, exist_ok=True)
    os.chdir(directory)
    return R.main(*args, **kwargs)

base = {base!r}
out = {{"uninterrupted": phase(base + "/u", "none", 0, 8, "md", "u.json")}}
# the chain: 2 replicas (0-2) -> one device (2-4, from the torch file) -> 2 replicas (4-6, from md.train)
out["chain"] = [phase(base + "/chain", "mirrored", 0, 2, "md", "p1.json"),
                phase(base + "/chain", "one", 2, 4, "torch", "p2.json"),
                phase(base + "/chain", "mirrored", 4, 6, "md", "p3.json")]
# dropout on, 2 replicas: interrupted at step 3 and resumed from either file
out["dropout"] = {{"uninterrupted": phase(base + "/d_u", "mirrored", 0, 6, "md", "u.json", dropout=0.3)}}
phase(base + "/d", "mirrored", 0, 3, "md", "first.json", dropout=0.3)
for name, fmt in (("torch", "torch"), ("md", "md"), ("torch_without_rng", "torch")):
    shutil.copytree(base + "/d", base + "/d_" + name)        # each resumes from the files of step 3
    out["dropout"][name] = phase(base + "/d_" + name, "mirrored", 3, 6, fmt, "r.json", dropout=0.3,
                                 restore_rng=name != "torch_without_rng")
os.makedirs(base + "/idioms"); os.chdir(base + "/idioms")
out["idioms"] = I.cases(md.distribute.MirroredStrategy())
print("RESULT " + json.dumps(out))
"""


def _result(proc):
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT "):])


def _close(got: dict, want: dict, tol: float = 1e-12) -> None:
    """Equal to ``want`` where the sum over replicas may reassociate (float64)."""
    for key in ("weights", "swa"):
        assert len(got[key]) == len(want[key])
        assert max(abs(a - b) for a, b in zip(got[key], want[key])) <= tol, key
    assert got["lr"] == want["lr"] and got["scale"] == want["scale"] and got["adam_steps"] == want["adam_steps"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("resume_torch"))
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS.format(here=HERE, base=base)], capture_output=True,
                          text=True, timeout=240, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", MULTIDEV_LOGICAL_CPUS="2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return base, _result(proc)


def test_recipe_chain_across_strategies_and_workers(run):
    base, out = run
    full, chain = out["uninterrupted"], out["chain"]
    assert chain[-1]["adam_steps"] == [6.0] and chain[-1]["lr"] == [0.00125]       # StepLR(2, 0.5) after 6 steps
    for got, start in zip(chain, (0, 2, 4)):
        for a, b in zip(got["losses"], full["losses"][start:]):
            assert abs(a - b) <= 1e-12 * abs(b)
    # The last phase: MultiWorkerMirroredStrategy on 2 workers under `multidev launch`, restoring the
    # md.train checkpoint the 2 replicas wrote (steps 6-8), then the end state of one device's 8 steps.
    directory = os.path.join(base, "chain")
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2", RECIPE, "mwms",
                           "6", "8", "md", "p4.json"], capture_output=True, text=True, timeout=120, cwd=directory,
                          env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(directory, "p4.json")) as f:
        last = json.load(f)
    _close(last, full)
    assert last["scale"] == 4096.0 and last["lr"] == [0.000625]


def test_dropout_resumes_with_every_replicas_draws(run):
    """The default generator's state (``torch.get_rng_state()`` in the recipe, ``rng=torch.default_generator``
    in md.train) gives the resumed run every replica's masks: bit for bit. Without it the run differs."""
    _, out = run
    runs = out["dropout"]
    full = runs["uninterrupted"]
    for fmt in ("torch", "md"):
        assert runs[fmt]["losses"] == full["losses"][3:], fmt
        assert runs[fmt]["weights"] == full["weights"] and runs[fmt]["swa"] == full["swa"], fmt
        assert runs[fmt]["lr"] == full["lr"] and runs[fmt]["scale"] == full["scale"]
    assert runs["torch_without_rng"]["weights"] != full["weights"]


def test_save_inside_run_and_per_replica_loss(run):
    got = run[1]["idioms"]["save_inside_run"]
    assert got["keys"] == ["emb.weight", "head.weight", "seen"] and got["equal"]
    assert got["momentum_saved"] == [0] and got["loss_is_tensor"]
    assert "strategy.reduce('mean', value, axis=None)" in got["refused"]     # at save, not at the resumed load


def test_state_dict_idioms(run):
    idioms = run[1]["idioms"]
    tied = idioms["safetensors_tied"]
    assert "Some tensors share memory" in tied["save_file_error"]          # as on one device
    assert tied["missing"] == [] and tied["unexpected"] == [] and tied["tied"] and tied["replicas_equal"] == [True, True]
    strict = idioms["strict_false"]
    assert strict["missing"] == ["seen", "head.weight"] and strict["unexpected"] == ["extra.weight"]
    assert strict["replica_sums"] == [80.0, 80.0] and "Missing key(s)" in strict["strict_error"]
    best = idioms["best_weights"]
    assert best["unchanged"] and best["live_followed"] and best["tied"] and best["replicas_back"] == [True, True]


def test_scheduler_states_and_refusal(run):
    got = run[1]["idioms"]["scheduler_states"]
    assert got["best"] == 2.0 and got["bad_epochs"] == 0 and got["plateau_equal"] and got["seq_equal"]
    assert "'state/callback'" in got["refused"] and "never pickles" in got["refused"]


def test_untracked_scheduler_is_reported_once(caplog, tmp_path):
    """A checkpoint of a torch optimizer that an LR scheduler drives, without the scheduler, would resume
    with the schedule restarted: the first save says so (once), a checkpoint that tracks it says nothing."""
    import logging

    import torch

    import multidev as md

    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with caplog.at_level(logging.WARNING, logger="multidev.train"):
        ckpt = md.train.Checkpoint(model=model, optimizer=optimizer)
        ckpt.write(str(tmp_path / "a"))
        ckpt.write(str(tmp_path / "b"))
    assert [r.getMessage().count("does not track") for r in caplog.records] == [1]
    caplog.clear()
    other = torch.optim.SGD(model.parameters(), lr=0.1)
    with caplog.at_level(logging.WARNING, logger="multidev.train"):
        md.train.Checkpoint(model=model, optimizer=other,
                            scheduler=torch.optim.lr_scheduler.ExponentialLR(other, 0.9)).write(str(tmp_path / "c"))
    assert caplog.records == [] and scheduler.get_last_lr() == [0.1]
