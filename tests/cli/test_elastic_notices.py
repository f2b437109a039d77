"""The multi-host launcher says when torch's elastic agent restarts the worker group, and why
(torch logs it at INFO, among dozens of lines)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from multidev.cli.elastic import restart_notice
from multidev.collectives.process_world import free_loopback_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_notices_for_a_failure_and_for_new_hosts():
    failed = "[default] Worker group FAILED. 2/3 attempts left; will restart worker group"
    assert restart_notice(failed) == ("multidev launch: a worker of this host failed (worker group FAILED); "
                                      "restarting the worker group on every host (restart 2 of --max-restarts 3).")
    exited = "failed (exitcode: -9) local_rank: 1 (pid: 5) of binary: python"
    assert "local worker 1 of this host exited with code 137" in restart_notice(failed, exited)
    assert "stopped responding" in restart_notice(failed.replace("FAILED", "UNHEALTHY"))
    joined = "[default] Detected 2 new nodes from group_rank=0; will restart worker group"
    assert "2 new host(s) are waiting to join" in restart_notice(joined)
    assert restart_notice("[default] Starting worker group") is None


@pytest.mark.timeout(180)
def test_a_restart_is_announced_with_the_worker_and_its_exit_code(tmp_path):
    script = tmp_path / "fail_once.py"
    script.write_text("import os, sys\n"
                      f"marker = {str(tmp_path / 'marker')!r}\n"
                      "if not os.path.exists(marker):\n    open(marker, 'w').close()\n    sys.exit(3)\n"
                      "print('second attempt ran')\n")
    port = free_loopback_ports(1)[0]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "multidev.cli.elastic", "--nnodes", "1", "--nproc-per-node", "1",
                           "--max-restarts", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                           str(script)], capture_output=True, text=True, timeout=150, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "second attempt ran" in proc.stdout
    assert ("multidev launch: local worker 0 of this host exited with code 3 (worker group FAILED); restarting the "
            "worker group on every host (restart 1 of --max-restarts 2).") in proc.stderr
