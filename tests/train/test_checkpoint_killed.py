"""A process killed (SIGKILL) while saving leaves a readable latest checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import multidev as md

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SAVER = """
import sys, torch, multidev as md
v = md.Variable(torch.zeros(1_000_000))
manager = md.train.CheckpointManager(md.train.Checkpoint(v=v), sys.argv[1], max_to_keep=2)
i = 0
while True:
    i += 1
    v.assign(torch.full((1_000_000,), float(i)))    # every element equal: a torn file would show
    manager.save()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_sigkill_during_saves_leaves_the_latest_checkpoint_readable(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for delay in (0.05, 0.4):
        directory = tmp_path / f"run{delay}"
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SAVER), str(directory)], env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while not (directory / "checkpoint").exists():
                assert proc.poll() is None and time.monotonic() < deadline, "the saver never saved"
                time.sleep(0.02)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        latest = md.train.latest_checkpoint(str(directory))
        restored = md.Variable(torch.full((1_000_000,), -1.0))
        md.train.Checkpoint(v=restored).restore(latest).assert_consumed()
        value = restored.detach()
        assert value[0] >= 1 and bool((value == value[0]).all())
        assert latest.endswith(f"ckpt-{int(value[0])}")
