"""Run a few worker processes on loopback with TF_CONFIG, bounded: every wait has a timeout, children die on failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from multidev.collectives.process_world import free_loopback_ports as free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cluster_configs(workers: int, chief: bool = False) -> list[tuple[str, int, str]]:
    """[(role, index, TF_CONFIG)] for every task of one loopback cluster."""
    ports = free_ports(workers + int(chief))
    cluster: dict = {"worker": [f"127.0.0.1:{p}" for p in ports[int(chief):]]}
    tasks = [("worker", i) for i in range(workers)]
    if chief:
        cluster["chief"] = [f"127.0.0.1:{ports[0]}"]
        tasks.insert(0, ("chief", 0))
    return [(r, i, json.dumps({"cluster": cluster, "task": {"type": r, "index": i}})) for r, i in tasks]


def run_cluster(body: str, workers: int = 2, *, chief: bool = False, timeout: float = 60.0,
                env: dict | None = None, wait_ranks: list[int] | None = None) -> list[subprocess.CompletedProcess]:
    """Run ``body`` in one process per task; returns their results in rank order (chief first).

    Every process gets TF_CONFIG, TASK_TYPE and TASK_INDEX. The harness waits for the ranks in
    ``wait_ranks`` (default all), then kills the rest; all are killed if the timeout passes.
    """
    code = textwrap.dedent(body)
    procs = []
    base = dict(os.environ)
    base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
    base["OMP_NUM_THREADS"] = "1"
    base.update(env or {})
    for role, index, cfg in cluster_configs(workers, chief):
        penv = dict(base, TF_CONFIG=cfg, TASK_TYPE=role, TASK_INDEX=str(index))
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=penv, cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline = time.monotonic() + timeout
    waited = set(range(len(procs)) if wait_ranks is None else wait_ranks)
    results = {}
    try:
        for rank in sorted(waited):
            p = procs[rank]
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results[rank] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, p in enumerate(procs):
        if rank not in results:
            out, err = p.communicate(timeout=10)
            results[rank] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return [results[r] for r in range(len(procs))]


def results_json(proc: subprocess.CompletedProcess) -> dict:
    """The ``RESULT {...}`` line a worker printed."""
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no RESULT line (rc={proc.returncode}):\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}")


def launch_program(program: str, out, workers: int = 2, timeout: float = 180) -> list[dict]:
    """Run ``program md OUT`` under ``multidev launch --workers N`` (as a user would) and return each
    worker's ``OUT/worker<i>.json``; a failed job fails the calling test with its output."""
    import pytest

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    env.pop("TF_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.main", "launch", "--workers", str(workers), program,
                           "md", str(out)], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if proc.returncode != 0:
        pytest.fail(f"rc={proc.returncode}\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}")
    results = []
    for i in range(workers):
        with open(os.path.join(str(out), f"worker{i}.json")) as f:
            results.append(json.load(f))
    return results
