"""Ports of public PyTorch training programs (``programs.py``) and the idioms written around them
(``idioms.py``) give one device's result on 2 replicas (float64, to rounding) and DDP's on 2 Gloo
processes (issue 23), or multidev refuses them saying why (``Program.refused``); where DDP itself
is no reference (``Program.ddp_differs``) its ranks are shown to drift apart.

All multidev cases run in one fresh interpreter and all DDP cases in one 2-process job, started
together; each writes its results to a temporary directory, and the tests compare them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.programs.idioms import ALL_PROGRAMS

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(script: str, out_dir: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    return subprocess.Popen([sys.executable, os.path.join(HERE, script), out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("programs"))
    port = str(_free_port())
    procs = [_start("run_multidev.py", out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start("run_ddp.py", out, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
              for r in range(2)]
    try:
        logs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    failed = [(p.args[2], p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    with open(os.path.join(out, "multidev.json")) as f, open(os.path.join(out, "ddp.json")) as g:
        return json.load(f), json.load(g)


def _max_difference(a: dict, b: dict) -> float:
    assert [len(p) for p in a["params"]] == [len(p) for p in b["params"]]
    return max(abs(x - y) for p, q in zip(a["params"], b["params"]) for x, y in zip(p, q))


def _no_error(result: dict) -> dict:
    assert "error" not in result, result["error"]
    return result


@pytest.mark.parametrize("program", ALL_PROGRAMS, ids=[p.name for p in ALL_PROGRAMS])
def test_program_equals_one_device_and_ddp(results, program):
    ours, ddp = results
    if program.refused:   # never a silent difference: the error says why
        assert re.search(program.refused, ours[program.name]["multidev"].get("error", "")), ours[program.name]["multidev"]
    else:
        _check_multidev(program, ours[program.name])
    got, theirs = ours[program.name].get("multidev"), _no_error(ddp[program.name])
    if program.ddp_differs:   # DDP gives no reference: its ranks drift apart, rank 0 is off one device
        assert theirs["rank_spread"] > 1e-6, program.ddp_differs
        assert _max_difference(theirs, ours[program.name]["one_device"]) > 1e-6, program.ddp_differs
        return
    assert theirs["rank_spread"] == 0.0, "every DDP rank holds the same parameters"
    if not program.refused:
        assert _max_difference(got, theirs) <= program.tolerance
        assert got["losses"] == pytest.approx(theirs["losses"], rel=program.tolerance, abs=program.tolerance)


def _check_multidev(program, result: dict) -> None:
    got = _no_error(result["multidev"])
    assert got["replica_spread"] == 0.0, "every replica's copy is the same"
    if program.compare_one_device:   # BatchNorm normalises each replica's half: DDP's result, not one device's
        reference = _no_error(result["one_device"])
        assert _max_difference(got, reference) <= program.tolerance
        assert got["losses"] == pytest.approx(reference["losses"], rel=program.tolerance, abs=program.tolerance)
