"""Start ``multidev launch --nnodes ...`` on simulated hosts (or on loopback) and read what the workers said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.multiworker import _elastic_job
from tests.multiworker._cluster import ROOT

# Bounded rendezvous: a host that never arrives (or was cut off) is given up on within a minute.
RDZV_CONF = "join_timeout=60,read_timeout=20,close_timeout=10"


def launch_argv(endpoint: str, node_rank: int, nnodes: int = 2, workers: int = 2, extra=()) -> list[str]:
    """The ``multidev launch`` command line of one host of the job."""
    return [sys.executable, "-m", "multidev.cli.main", "launch", "--nnodes", str(nnodes),
            "--node-rank", str(node_rank), "--rdzv-backend", "c10d", "--rdzv-id", "job",
            "--rdzv-endpoint", endpoint, "--rdzv-conf", RDZV_CONF, "--workers", str(workers),
            "--stop-grace", "2", *extra, _elastic_job.PATH]


def job_env(job_dir: str, ifname: str | None = None, **settings: str) -> dict[str, str]:
    """Environment of a launcher: this worktree's code, one thread per worker, the job's settings."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TF_CONFIG", None)
    env["JOB_DIR"] = job_dir
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = ifname   # Gloo binds to this host's veth end
    env.update(settings)
    return env


class Launch:
    """One launcher process whose output goes to a file (no pipe can fill up and block it)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: str, host=None):
        self.log = log
        with open(log, "w") as f:
            if host is None:
                self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            else:
                self.proc = host.popen(argv, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)

    def wait(self, deadline: float) -> int | None:
        """The exit code, or None if it is still running at ``deadline`` (time.monotonic())."""
        try:
            return self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def output(self) -> str:
        with open(self.log) as f:
            return f.read()


def start(hosts, job_dir: str, extra=(), **settings: str) -> list[Launch]:
    """One launcher per host (host 0 hosts the rendezvous on its own address)."""
    endpoint = f"{hosts[0].address}:29400"
    os.makedirs(job_dir, exist_ok=True)
    return [Launch(launch_argv(endpoint, r, len(hosts), extra=extra), job_env(job_dir, h.ifname, **settings),
                   os.path.join(job_dir, f"launch-{r}.log"), host=h) for r, h in enumerate(hosts)]


def finish(launches: list[Launch], timeout: float) -> list[int | None]:
    """Wait for every launcher (bounded); kill those still running. Returns their exit codes (None: killed)."""
    deadline = time.monotonic() + timeout
    codes = [launch.wait(deadline) for launch in launches]
    for launch in launches:
        launch.kill()
    return codes


def worker_lines(text: str, tag: str) -> list[str]:
    """The workers' lines starting with ``tag`` (the launcher's ``[worker R]`` prefix removed)."""
    out = []
    for line in text.splitlines():
        body = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        if body.startswith(tag + " "):
            out.append(body[len(tag) + 1:])
    return out


def results(text: str) -> dict[int, dict]:
    """rank -> the RESULT a worker printed (last one per rank)."""
    found = {}
    for line in worker_lines(text, "RESULT"):
        result = json.loads(line)
        found[result["rank"]] = result
    return found


def ranks_by_ifname(text: str) -> dict[str, set[int]]:
    """GLOO_SOCKET_IFNAME -> the ranks that started with it (which host each rank runs on)."""
    found: dict[str, set[int]] = {}
    for line in worker_lines(text, "HOST"):
        rank, ifname, _ = line.split()
        found.setdefault(ifname, set()).add(int(rank))
    return found
