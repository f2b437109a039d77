"""torch.distributed features beyond the DDP wrapper (``ddp_features.py``): ZeroRedundancyOptimizer, uneven
inputs (``Join`` / ``model.join()``, a partial last batch, ``DistributedSampler(drop_last=False)``), the
``DistributedDataParallel`` wrapper kept with ``no_sync``, ``model.module`` and rank-0 logging and saving,
and ``torch.distributed.nn.functional``'s differentiable collectives in a loss. Each works as under DDP on
2 Gloo processes or is refused saying why and naming multidev's way, on MirroredStrategy (2 replicas in one
process) and on MultiWorkerMirroredStrategy (2 workers of one replica, with and without the program's own
process group). One DDP job, one worker job and one MirroredStrategy interpreter, started together.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from multidev.collectives.process_world import free_loopback_ports
from tests.conftest import ROOT
from tests.programs.test_programs import _finish, _load

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 200


def _start(mode: str, out_dir: str, **env: str) -> subprocess.Popen:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    for name in ("TF_CONFIG", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if name not in env:
            full.pop(name, None)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_features.py"), mode, out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ddp_features"))
    ddp_port, mwms_port, *workers = free_loopback_ports(4)
    procs = [_start("threads", out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start("ddp", out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(ddp_port)) for r in range(2)]
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in workers]})
    secret = secrets.token_hex(32)
    procs += [_start("mwms", out, MULTIDEV_LOGICAL_CPUS="1", MULTIDEV_JOB_SECRET=secret, RANK=str(i), LOCAL_RANK=str(i),
                     WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mwms_port),
                     TF_CONFIG=f'{{"cluster": {cluster}, "task": {{"type": "worker", "index": {i}}}}}')
              for i in range(2)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args[2], p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    return (_load(out, "features_threads.json"), [_load(out, f"features_ddp_{r}.json") for r in range(2)],
            [_load(out, f"features_mwms_{r}.json") for r in range(2)])


def test_dump(results):
    json.dump(results, open("/tmp/ddpf/res.json", "w"))
