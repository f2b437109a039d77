"""Elastic resume on one host: ``multidev launch --max-restarts`` + BackupAndRestore, no human involved.

A worker SIGKILLs itself mid-epoch (once); torch's elastic agent restarts the worker group, the
restarted ``fit`` resumes from the last backup, and the job ends with the weights of an
uninterrupted run, bitwise (dropout included: every worker's RNG state is part of the backup).
The same across two simulated hosts: ``test_netns_hosts.py``.
"""

from __future__ import annotations

import os

import pytest

from tests.multiworker import _hosts_launch as hl
from tests.multiworker._cluster import free_ports

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def run_local(job_dir, extra=(), **settings):
    (port,) = free_ports(1)
    argv = hl.launch_argv(f"127.0.0.1:{port}", 0, nnodes=1, workers=2, extra=extra)
    os.makedirs(job_dir, exist_ok=True)
    launch = hl.Launch(argv, hl.job_env(str(job_dir), **settings), os.path.join(job_dir, "launch.log"))
    (code,) = hl.finish([launch], 180)
    return code, launch.output()


def test_elastic_resume_on_one_host_is_bitwise_exact(tmp_path):
    settings = dict(JOB_DROPOUT="1", JOB_BACKUP_FREQ="2")
    code, out = run_local(tmp_path / "reference", **settings)
    assert code == 0, out[-6000:]
    expected = hl.results(out)

    job = tmp_path / "elastic"
    code, out = run_local(job, extra=("--max-restarts", "1"), JOB_KILL="1:5", **settings)
    assert code == 0, out[-8000:]
    assert (job / "killed-1").exists()
    assert "worker 1 kills itself after batch 5" in out
    assert {line.split()[2] for line in hl.worker_lines(out, "HOST")} == {"0", "1"}, out[-8000:]  # one restart
    results = hl.results(out)
    assert sorted(results) == sorted(expected) == [0, 1]
    for rank in (0, 1):
        assert results[rank]["weights"] == expected[rank]["weights"]
        assert results[rank]["iterations"] == expected[rank]["iterations"] == 18
    assert not (job / "backup").exists()


def test_elastic_without_restarts_left_fails_with_the_workers_exit_code(tmp_path):
    code, out = run_local(tmp_path / "job", JOB_KILL="1:2")   # --max-restarts 0 (the default)
    assert code == 128 + 9, out[-6000:]                       # worker 1 was SIGKILLed, nothing restarted it
    assert "multidev launch: worker 1 failed first, with exit code 137." in out
    assert hl.results(out) == {}
