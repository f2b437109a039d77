"""Running a benchmark part in fresh interpreters (device configuration is per process) and
reading back its result: the child prints one ``RESULT <json>`` line on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import multidev
from multidev.collectives.process_world import free_loopback_ports as free_ports

_ROOT = str(Path(multidev.__file__).resolve().parents[1])
RESULT_PREFIX = "RESULT "
PROGRESS_PREFIX = "PROGRESS "


class BenchChildError(RuntimeError):
    """A benchmark child process failed or printed no result."""


def emit(result: Any) -> None:
    """Print ``result`` as the child's RESULT line (called by the child)."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def emit_and_leave(result: Any, rank: int) -> None:
    """End a multi-process worker: rank 0 prints ``result``, then every rank leaves at once. torch's
    Gloo/TCPStore threads left behind by ``destroy_process_group`` can abort the interpreter at its
    normal exit ("terminate called without an active exception", exit code -6) after the work is done."""
    if rank == 0:
        emit(result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def progress(line: str) -> None:
    """Print one progress line (called by the child): the parent shows it on stderr as it comes."""
    print(PROGRESS_PREFIX + line, flush=True)


def child_env(extra: dict | None = None, threads: int | None = None) -> dict:
    """Environment for a child: this checkout first on PYTHONPATH, optional thread count."""
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def parse_result(stdout: str, what: str, stderr: str = "", returncode: int = 0) -> Any:
    """The RESULT payload in ``stdout``; BenchChildError with the child's output otherwise."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise BenchChildError(f"{what} printed no result (exit code {returncode}).\n--- stdout ---\n{stdout[-4000:]}"
                          f"\n--- stderr ---\n{stderr[-4000:]}")


def run_one(module: str, spec: dict, timeout: float, threads: int | None = None) -> Any:
    """Run ``python -m module '<spec json>'`` and return its RESULT; its PROGRESS lines are shown on
    stderr as they come (long runs show where they are)."""
    proc = subprocess.Popen([sys.executable, "-m", module, json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(threads=threads), cwd=_ROOT)
    err_lines: list[str] = []
    reader = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)  # no pipe deadlock
    reader.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out_lines: list[str] = []
    try:
        for line in proc.stdout:
            if line.startswith(PROGRESS_PREFIX):
                print(f"[bench] {line[len(PROGRESS_PREFIX):].rstrip()}", file=sys.stderr, flush=True)
            else:
                out_lines.append(line)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
    stdout, stderr = "".join(out_lines), "".join(err_lines)
    if proc.returncode != 0:
        raise BenchChildError(f"{module} failed (exit code {proc.returncode}"
                              f"{', killed after ' + format(timeout, 'g') + ' s' if proc.returncode == -9 else ''})."
                              f"\n--- stdout ---\n{stdout[-4000:]}\n--- stderr ---\n{stderr[-4000:]}")
    return parse_result(stdout, module, stderr, proc.returncode)


def tf_config(ports: list[int], index: int) -> str:
    """TF_CONFIG of worker ``index`` in a loopback cluster on ``ports``."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}})


def run_workers(module: str, spec: dict, workers: int, timeout: float, threads: int = 1) -> Any:
    """Run ``module`` in ``workers`` processes on loopback (TF_CONFIG for multidev, MASTER_ADDR/PORT,
    RANK and WORLD_SIZE for torch.distributed); returns rank 0's RESULT. Every child is killed if
    one fails or the timeout passes."""
    ports = free_ports(workers + 1)
    procs = []
    for rank in range(workers):
        env = child_env({"TF_CONFIG": tf_config(ports[1:], rank), "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": str(ports[0]), "RANK": str(rank), "WORLD_SIZE": str(workers)}, threads)
        env.pop("MULTIDEV_DEVICES_PER_WORKER", None)
        procs.append(subprocess.Popen([sys.executable, "-m", module, json.dumps(spec)], env=env, cwd=_ROOT,
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            outputs.append((p.returncode, out, err))
            if p.returncode != 0:
                break
    except subprocess.TimeoutExpired:
        raise BenchChildError(f"{module} with {workers} workers did not finish within {timeout:g} s.") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for rank, (code, out, err) in enumerate(outputs):
        if code != 0:
            raise BenchChildError(f"{module} worker {rank} failed (exit code {code}).\n--- stdout ---\n{out[-4000:]}"
                                  f"\n--- stderr ---\n{err[-4000:]}")
    code, out, err = outputs[0]
    return parse_result(out, f"{module} worker 0", err, code)
