"""Self-supervised and teacher-student programs (``ssl_programs.py``, ``ssl_simclr.py``,
``ssl_programs2.py``: MoCo v2, BYOL, SimSiam, SimCLR, DINO, FixMatch's mean teacher, distillation)
ported with two lines plus their ``torch.distributed`` lines (``ssl_port.py``) give DDP's weights,
teachers and buffers (queue, center; ``_close``: weights, observed buffers, losses) on 2 Gloo processes, on MirroredStrategy (2 logical CPUs) and on MultiWorkerMirroredStrategy (2
workers of 1 logical CPU), or are refused saying why (``Program.refused``, ``workers_refused``).

The multidev cases run in one fresh interpreter, the DDP cases in one 2-process job and the workers in
one 2-process job, all started together (``run_ssl.py``); the tests compare the JSON they write.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys

import pytest

from multidev.collectives.process_world import free_loopback_ports
from tests.conftest import ROOT
from tests.programs.ssl_programs import SSL_PROGRAMS
from tests.programs.ssl_programs2 import SSL_PROGRAMS2
from tests.programs.ssl_simclr import SSL_SIMCLR
from tests.programs.test_programs import _close, _finish, _load, _max_difference, _no_error   # the same jobs' helpers

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = SSL_PROGRAMS + SSL_SIMCLR + SSL_PROGRAMS2
TIMEOUT_S = 240


def _start(mode: str, out_dir: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "run_ssl.py"), mode, out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ssl"))
    ddp_port, *workers = free_loopback_ports(3)
    procs = [_start("multidev", out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start("ddp", out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(ddp_port)) for r in range(2)]
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in workers]})
    secret = secrets.token_hex(32)
    procs += [_start("mwms", out, MULTIDEV_LOGICAL_CPUS="1", MULTIDEV_JOB_SECRET=secret,
                     TF_CONFIG=f'{{"cluster": {cluster}, "task": {{"type": "worker", "index": {i}}}}}')
              for i in range(2)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args[2], p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    return (_load(out, "ssl_multidev.json"), _load(out, "ssl_ddp.json"),
            [_load(out, f"ssl_mwms_w{i}.json") for i in range(2)])


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_ssl_program_on_replicas_equals_ddp(results, program):
    """MirroredStrategy's replicas hold one set of weights, DDP's rank 0's; or the port is refused
    with the fix (where DDP trains)."""
    ours, ddp, _ = results
    theirs = _no_error(ddp[program.name])
    assert theirs["rank_spread"] == 0.0, "every DDP rank holds the same parameters"
    got = ours[program.name]["multidev"]
    if program.refused:
        assert re.search(program.refused, got.get("error", "")), got
        return
    assert _no_error(got)["replica_spread"] == 0.0, "every replica's copy is the same"
    _close(program, got, theirs)
    if program.compare_one_device:   # no BatchNorm, no draws in the step: one device's too
        _close(program, got, _no_error(ours[program.name]["one_device"]))


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_ssl_program_on_workers_equals_ddp(results, program):
    """MultiWorkerMirroredStrategy, 2 workers of 1 replica (each worker a DDP rank): DDP's weights on
    every worker, or the refusal on every worker."""
    _, ddp, workers = results
    if program.workers_refused:
        for worker in workers:
            assert re.search(program.workers_refused, worker[program.name].get("error", "")), worker[program.name]
        return
    first = _no_error(workers[0][program.name])
    assert _no_error(workers[1][program.name])["params"] == first["params"], "every worker's"
    _close(program, first, ddp[program.name])


def test_simclr_gather_layers_differ(results):
    """Spijkervet's GatherLayer drops the other ranks' loss terms from each rank's gradient: its DDP
    weights differ from FullGatherLayer's (ctx.all_gather's); the port reproduces each."""
    _, ddp, _ = results
    assert _max_difference(ddp["simclr_own_slice_gather_layer"], ddp["simclr_gathered_negatives"]) > 1e-6


def test_all_gather_gradient_is_tensorflows(results):
    """``ctx.all_gather`` of tensors that need gradients: each replica's gradient is the sum over every
    replica's loss of the gathered gradient, at its own slice, also for uneven lengths along axis 0
    and along axis 1 of a tuple holding a tensor that needs none. TensorFlow 2.21's MirroredStrategy
    gives these numbers for the same losses (gathering the tuple's tensors one by one: its gradient of
    the tuple's gather stacks the two gradients of unequal shapes and raises)."""
    got = _no_error(results[0]["all_gather_gradient"])
    # replica r weights the gathered (3, 2) rows and (3, 3) columns by (1 .. numel) * 10**r
    rows = [[(2 * i + j + 1) * 11.0 for j in range(2)] for i in range(3)]
    cols = [[(3 * i + j + 1) * 11.0 for j in range(3)] for i in range(3)]
    assert got["rows"] == [rows[:1], rows[1:]]
    assert got["cols"] == [[row[:1] for row in cols], [row[1:] for row in cols]]
    assert got["shapes"] == [[3, 2, 3, 3, 3, 4]] * 2


def test_buffer_of_module_built_in_the_step_is_the_replicas_own(results):
    """A DINOLoss built inside the step (each replica's own module) moves its center once per call:
    0.2, then 0.38 (the all-reduced batch center is 2.0), on both replicas."""
    centers = _no_error(results[0]["buffer_of_module_built_in_step"])["center"]
    for center in centers:
        assert center[0] == pytest.approx([0.38] * 4, rel=1e-12)


def test_data_assignment_in_the_step_sets_the_replicas_copy(results):
    """``p.data = t`` inside ``strategy.run`` (MoCo's momentum update) sets the calling replica's copy
    once per run, twice in a row; copies that then differ raise ValueError, as other replica writes."""
    got = results[0]["data_assign_differing"]
    assert got["copies"] == [got["expected"]] * 2
    assert "Variable 'Linear.bias:0' was written inside strategy.run outside an optimizer step" in got["error"]
    assert "replica 1's copy now differs from replica 0's" in got["error"]
