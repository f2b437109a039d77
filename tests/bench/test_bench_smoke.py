"""``multidev bench --smoke``: every suite runs end to end and reports what it should. Correctness
only: the numbers of a smoke run are not read (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from multidev.bench.report import render
from multidev.bench.variants import DEFAULT_VARIANTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.timeout(600)]


def _bench(*args: str, timeout: float = 540) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "multidev.cli.main", "bench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_smoke_run_of_every_suite_reports_every_variant(tmp_path):
    out = tmp_path / "bench.json"
    proc = _bench("all", "--smoke", "--json", "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(out.read_text())
    assert json.loads(proc.stdout) == report
    text = render(report)
    assert "## Training step time" in text and "## All-reduce" in text and "## Targets" in text
    assert report["smoke"] is True and report["machine"]["nproc"] >= 1
    variants = report["train"]["results"]["text_conv"]
    assert sorted(variants) == sorted(DEFAULT_VARIANTS)  # the Keras 3 ones only when asked for
    for r in variants.values():
        assert r["step_s"]["median"] > 0 and r["batch_size"] == 32
    targets = {t["target"] for t in report["targets"]}
    assert any("1.10x DDP" in t for t in targets) and any("1.03x" in t for t in targets)
    paths = {(r["path"], r["replicas"]) for r in report["collectives"]["rows"]}
    assert paths == {("replica_context", 2), ("gradient_buckets", 2), ("extended", 2), ("replica_context", 4),
                     ("gradient_buckets", 4), ("extended", 4), ("process_collective", 2), ("torch_distributed", 2)}
    assert max(r["bytes"] for r in report["collectives"]["rows"]) <= 64 * 1024
    assert report["collectives"]["memcpy"]["bytes_per_s"] > 0
    memory = report["memory"]
    assert memory["replicas"] == 2 and len(memory["samples"]) >= 2


def test_unknown_names_are_refused_with_the_valid_ones():
    proc = _bench("--variants", "plain,nope", timeout=120)
    assert proc.returncode != 0 and "unknown variant" in proc.stderr and "mirrored_2" in proc.stderr


def test_smoke_report_says_its_targets_are_not_measured():
    """A newcomer's first `multidev bench --smoke` showed "NO" on targets: the report says why that means nothing."""
    row = {"workload": "text_conv", "target": "MirroredStrategy 1 device, custom loop <= 1.03x plain",
           "ratio": 2.376, "bound": 1.03, "holds": False, "cpu_ratio": 4.4}
    report = {"machine": {"nproc": 2, "load_average": [7.2]}, "command": "multidev bench --smoke", "targets": [row]}
    assert "not measurements" in render(dict(report, smoke=True))
    assert "not measurements" not in render(dict(report, smoke=False))
