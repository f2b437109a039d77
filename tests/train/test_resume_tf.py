"""A TensorFlow-style custom loop resumed from ``md.train`` checkpoints of its distributed iterator
gives the uninterrupted run's result: stopped between two saves in the second pass of a shuffled,
repeated dataset on 2 replicas, resumed on one device (restoring into a subclassed model before it is
built), stopped again, and finished under MultiWorkerMirroredStrategy on 2 workers. TensorFlow's own
numbers for these idioms are the conformance cases ``resume.*`` (tests/conformance/cases/resume.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "resume_tf_loop.py")

IN_PROCESS = """
import os, sys
sys.path.insert(0, {here!r})
import resume_tf_loop as L

def phase(directory, *args):
    os.makedirs(directory, exist_ok=True)
    os.chdir(directory)
    L.main(*args)

phase({base!r} + "/u", "mirrored", False, 15, "u.json")
phase({base!r} + "/chain", "mirrored", False, 6, "a.json")    # saves after steps 1, 3, 5; stops after 6
phase({base!r} + "/chain", "one", True, 11, "b.json")         # resumes at 5; saves after 6, 8, 10
"""


def _load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _close(got: list, want: list, tol: float = 2e-6) -> None:
    """float32 sums over 1 or 2 replicas or workers: equal up to reassociation."""
    assert len(got) == len(want) and max(abs(a - b) for a, b in zip(got, want)) <= tol


def test_distributed_iterator_resumes_across_strategies_and_workers(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", IN_PROCESS.format(here=HERE, base=str(tmp_path))], capture_output=True,
                          text=True, timeout=200, cwd=ROOT, env=dict(env, MULTIDEV_LOGICAL_CPUS="2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chain = str(tmp_path / "chain")
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", "2", LOOP, "mwms", "1", "15",
                           "c.json"], capture_output=True, text=True, timeout=120, cwd=chain, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    full = _load(str(tmp_path / "u" / "u.json"))
    first, second, last = (_load(os.path.join(chain, name)) for name in ("a.json", "b.json", "c.json"))
    assert first["losses"] == full["losses"][:6]
    assert (second["start"], last["start"]) == (5, 10)        # the latest saves: between-save steps run again
    _close(second["losses"], full["losses"][5:11])
    _close(last["losses"], full["losses"][10:])
    _close(last["weights"], full["weights"])
    assert last["iterations"] == full["iterations"] == 15
