"""Ports of public PyTorch training programs (``programs.py``) and the idioms written around them
(``idioms.py``, ``idioms2.py``) give one device's result on 2 replicas (float64, to rounding) and DDP's on 2 Gloo
processes (issue 23), or multidev refuses them saying why (``Program.refused``); where DDP itself
is no reference (``Program.ddp_differs``) its ranks are shown to drift apart. The same programs on
MultiWorkerMirroredStrategy, 2 worker processes of 1 and of 2 logical CPUs (2 and 4 replicas in
all), give one device's result too (or MirroredStrategy's refusal), every worker holding the same
weights.

The DDP tutorial's Trainer (``tutorial.py``, its port ``tutorial_port.py``) reads its input through
a DataLoader with a DistributedSampler: its tests compare the port's weights and snapshot with DDP's.

All multidev cases run in one fresh interpreter, all DDP cases in one 2-process job and the
MultiWorkerMirroredStrategy cases in one 2-process job per layout, all started together; each
writes its results to a temporary directory, and the tests compare them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys

import pytest

from multidev.collectives.process_world import free_loopback_ports
from tests.conftest import ROOT
from tests.programs.idioms import ALL_PROGRAMS

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 240
WORKER_LAYOUTS = ("1x2", "2x2")   # logical CPUs per worker x workers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(script: str, out_dir: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    return subprocess.Popen([sys.executable, os.path.join(HERE, script), out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _start_workers(layout: str, out_dir: str) -> list[subprocess.Popen]:
    """One MultiWorkerMirroredStrategy job on a loopback cluster (TF_CONFIG, a job secret)."""
    local, workers = layout.split("x")
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in free_loopback_ports(int(workers))]})
    secret = secrets.token_hex(32)
    return [_start("run_mwms.py", out_dir, MULTIDEV_LOGICAL_CPUS=local, MULTIDEV_JOB_SECRET=secret,
                   TF_CONFIG=f'{{"cluster": {cluster}, "task": {{"type": "worker", "index": {i}}}}}')
            for i in range(int(workers))]


def _finish(procs: list[subprocess.Popen], timeout: float) -> list[str]:
    """Each process's output once all exit; any still running after ``timeout`` is killed."""
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


def _load(out: str, name: str) -> dict:
    with open(os.path.join(out, name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("programs"))
    port = str(_free_port())
    procs = [_start("run_multidev.py", out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start("run_ddp.py", out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port)
              for r in range(2)]
    for layout in WORKER_LAYOUTS:
        procs += _start_workers(layout, out)
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args[2], p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    workers = {layout: [_load(out, f"mwms_{layout}_w{w}.json") for w in range(int(layout.split("x")[1]))]
               for layout in WORKER_LAYOUTS}
    return _load(out, "multidev.json"), _load(out, "ddp.json"), workers


def _max_difference(a: dict, b: dict) -> float:
    assert [len(p) for p in a["params"]] == [len(p) for p in b["params"]]
    return max(abs(x - y) for p, q in zip(a["params"], b["params"]) for x, y in zip(p, q))


def _no_error(result: dict) -> dict:
    assert "error" not in result, result["error"]
    return result


@pytest.mark.parametrize("program", ALL_PROGRAMS, ids=[p.name for p in ALL_PROGRAMS])
def test_program_equals_one_device_and_ddp(results, program):
    ours, ddp, _ = results
    if program.refused:   # never a silent difference: the error says why
        assert re.search(program.refused, ours[program.name]["multidev"].get("error", "")), ours[program.name]["multidev"]
    else:
        _check_multidev(program, ours[program.name])
    if program.ddp_refused:   # DDP's own refusal: nothing to compare with
        assert re.search(program.ddp_refused, ddp[program.name].get("error", "")), ddp[program.name]
        return
    got, theirs = ours[program.name].get("multidev"), _no_error(ddp[program.name])
    if program.ddp_differs:   # DDP gives no reference: its ranks drift apart, rank 0 is off one device
        assert theirs["rank_spread"] > 1e-6, program.ddp_differs
        assert _max_difference(theirs, ours[program.name]["one_device"]) > 1e-6, program.ddp_differs
        return
    assert theirs["rank_spread"] == 0.0, "every DDP rank holds the same parameters"
    if not program.refused:
        _close(program, got, theirs)


def _check_multidev(program, result: dict) -> None:
    got = _no_error(result["multidev"])
    assert got["replica_spread"] == 0.0, "every replica's copy is the same"
    if program.compare_one_device:   # BatchNorm normalises each replica's half: DDP's result, not one device's
        _close(program, got, _no_error(result["one_device"]))


def _close(program, got: dict, reference: dict) -> None:
    observed = [x for row in got["observed"] for x in row]   # a GradScaler's scale, a plateau's best
    assert observed == pytest.approx([x for row in reference["observed"] for x in row], rel=1e-12, abs=1e-12)
    assert _max_difference(got, reference) <= program.tolerance
    assert got["losses"] == pytest.approx(reference["losses"], rel=program.tolerance, abs=program.tolerance)


@pytest.mark.parametrize("layout", WORKER_LAYOUTS)
@pytest.mark.parametrize("program", ALL_PROGRAMS, ids=[p.name for p in ALL_PROGRAMS])
def test_program_on_workers_equals_one_device(results, program, layout):
    """MultiWorkerMirroredStrategy: every local replica and every worker hold the same weights, one
    device's (BatchNorm: MirroredStrategy's on the same 2 replicas; 4 have no reference); a refusal
    is MirroredStrategy's, word for word, on every worker."""
    ours, _, workers = results
    got = [w[program.name] for w in workers[layout]]
    if program.workers_refused:   # where several workers cannot do what one process does, the error says why
        for result in got:
            assert re.search(program.workers_refused, result.get("error", "")), result
        return
    if program.refused:
        for result in got:
            assert result.get("error") == ours[program.name]["multidev"]["error"], result
        return
    first = _no_error(got[0])
    for result in got:
        assert _no_error(result)["replica_spread"] == 0.0, "every local replica's copy is the same"
        assert result["params"] == first["params"] and result["losses"] == first["losses"], "every worker's"
    if program.compare_one_device:
        _close(program, first, _no_error(ours[program.name]["one_device"]))
    elif layout == "1x2":
        _close(program, first, _no_error(ours[program.name]["multidev"]))


# --- the DDP tutorial series' Trainer and its port (tutorial.py, tutorial_port.py) ------------------------
def _params_difference(a: list, b: list) -> float:
    assert [len(p) for p in a] == [len(p) for p in b]
    return max(abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q))


@pytest.mark.parametrize("case", ["ddp_tutorial", "ddp_tutorial_keras_fit"])
def test_ddp_tutorial_port_equals_ddp(results, case):
    """A DataLoader with a DistributedSampler of the job's workers, set_epoch each epoch (the Trainer's
    loop, or Keras's fit with a callback): each worker's batches are its share of DDP's global batch
    (never sharded again), on 2 workers of 1 or 2 replicas; worker 0's snapshot holds the trained
    weights. One worker (MirroredStrategy): its sampler of 1 gives every example, as one device."""
    ours, ddp, workers = results
    tutorial, theirs = ours["tutorial"], _no_error(ddp["tutorial"])
    assert _params_difference(theirs["params"], tutorial["one_device"]) <= 1e-12   # DDP = one device on the union
    assert theirs["snapshot"] == theirs["params"]
    assert _params_difference(tutorial["one_device_no_set_epoch"], tutorial["one_device"]) > 1e-6, "set_epoch matters"
    mirrored = _no_error(tutorial[case])
    assert mirrored["replica_spread"] == 0.0 and mirrored.get("snapshot", mirrored["params"]) == mirrored["params"]
    assert _params_difference(mirrored["params"], tutorial["one_device_1"]) <= 1e-12
    for layout in WORKER_LAYOUTS:
        got = [_no_error(w["tutorial"][case]) for w in workers[layout]]
        assert all(g["replica_spread"] == 0.0 and g["params"] == got[0]["params"] for g in got)
        assert _params_difference(got[0]["params"], theirs["params"]) <= 1e-12, layout
        if case == "ddp_tutorial":   # only worker 0 saves (the tutorial's `if self.gpu_id == 0`)
            assert got[0]["snapshot"] == got[0]["params"] and not any(g["saved_here"] for g in got[1:])


def test_ddp_tutorial_sampler_of_another_layout_is_refused(results):
    """A sampler sliced per replica (num_replicas=num_replicas_in_sync) where the job's workers are
    fewer: a ValueError naming the sampler and both fixes, on every worker; where the two agree
    (2 workers of 1 replica) it trains as the port does."""
    ours, _, workers = results
    pattern = (r"DistributedSampler\(num_replicas={n}, rank=\d\) gives it 1/{n} of the data, but this job has {w} "
               r"worker.*num_replicas={w}, rank=\d.*drop the sampler")
    error = ours["tutorial"]["ddp_tutorial_sampler_per_replica"].get("error", "")
    assert error.startswith("ValueError") and re.search(pattern.format(n=2, w=1), error), error
    for result in workers["2x2"]:
        error = result["tutorial"]["ddp_tutorial_sampler_per_replica"].get("error", "")
        assert error.startswith("ValueError") and re.search(pattern.format(n=4, w=2), error), error
    same = [_no_error(w["tutorial"]["ddp_tutorial_sampler_per_replica"]) for w in workers["1x2"]]
    assert same[0]["params"] == _no_error(workers["1x2"][0]["tutorial"]["ddp_tutorial"])["params"]


def test_keras_fit_on_a_distributed_dataset_of_workers_equals_one_device(results):
    """``fit(strategy.experimental_distribute_dataset(dataset))``: each worker's batches are already its
    slices, also with one replica per worker (plain tensors then, once split again: half its share)."""
    ours, _, workers = results
    want = ours["tutorial"]["one_device_in_order"]
    for got in [ours["tutorial"]] + [w["tutorial"] for layout in WORKER_LAYOUTS for w in workers[layout]]:
        result = _no_error(got["keras_fit_distributed_dataset"])
        assert result["replica_spread"] == 0.0 and _params_difference(result["params"], want) <= 1e-12
