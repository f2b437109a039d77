"""``benchmarks/gpu_check.sh --dry-run``: the prepared GPU check runs every one of its steps on CPU,
so the script cannot rot between the rare sessions that have a GPU (issue 28)."""

from __future__ import annotations

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = ("devices", "pytest -m gpu", "pytest -k gpu-relevant", "bench train", "bench scaling", "profile")

pytestmark = [pytest.mark.timeout(900)]


def test_dry_run_runs_every_step_and_writes_at_most_eight_files(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=850)
    summary = (tmp_path / "summary.txt").read_text()
    assert proc.returncode == 0, summary + proc.stderr[-3000:]
    for step in STEPS:
        assert f"{step}: rc=0" in summary, summary
    files = sorted(p.name for p in tmp_path.iterdir())
    # the device tool brings back at most 8 files from $OUT
    assert files == ["bench_scaling.json", "bench_scaling.txt", "bench_train.json", "bench_train.txt", "profile.txt",
                     "pytest.txt", "summary.txt"]
    train = (tmp_path / "bench_train.txt").read_text()
    assert "| text_conv | plain_bf16 |" in train and "| text_conv | mirrored_2 |" in train
    assert "[bench] text_conv round 1/1: plain" in train            # progress shown as each variant finishes
    scaling = (tmp_path / "bench_scaling.txt").read_text()
    assert "| MirroredStrategy (threads) |" in scaling and "| torch DDP (processes) |" in scaling
    assert "failed" not in scaling
    assert "## text_conv" not in (tmp_path / "profile.txt").read_text()  # the dry run profiles mlp
    assert "## mlp / mirrored_2" in (tmp_path / "profile.txt").read_text()


def test_unknown_option_is_refused_with_the_usage():
    proc = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--gpu"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "usage: bash benchmarks/gpu_check.sh [--dry-run]" in proc.stderr
