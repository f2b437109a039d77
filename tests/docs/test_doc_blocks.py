"""Every code block of README.md and docs/*.md runs and prints what the text says (issue 27):
python blocks in a fresh interpreter per file, in order (``doc_blocks`` explains the conventions);
shell blocks' ``multidev`` commands are covered where named in ``SHELL_COVERED``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.doc_blocks import CHECK_SOURCE, blocks, instrument, segments

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
PREAMBLE = "import os, sys, torch, numpy as np\nimport multidev as md\n"


def _segments():
    return [(path, i, group) for path in FILES for i, group in enumerate(segments(path))]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path, index, group", _segments(), ids=lambda v: v.name if isinstance(v, Path) else
                         (str(v) if isinstance(v, int) else "blocks"))
def test_python_blocks_run_in_order_and_print_what_the_text_says(path, index, group, tmp_path):
    parts = [PREAMBLE, CHECK_SOURCE]
    for block in group:
        if block.setup:
            parts.append(f"# --- setup before {block.name}\n{block.setup}")
        parts.append(f"# --- {block.name}\n{instrument(block.code, block.name)}")
    script = tmp_path / f"{path.stem}_{index}_blocks.py"
    script.write_text("\n".join(parts))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", KERAS_BACKEND="torch")
    env.pop("MULTIDEV_LOGICAL_CPUS", None)   # the blocks configure what they need, as a reader's program would
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=540)
    names = ", ".join(b.name for b in group)
    assert proc.returncode == 0, f"blocks {names} failed:\n{proc.stderr[-5000:]}"


def test_every_block_runs_or_says_why_not():
    """A python block is run above or carries a doc-skip reason; shell blocks are prose commands
    whose ``multidev`` invocations the CLI tests cover."""
    for path in FILES:
        for block in blocks(path):
            if block.language == "python":
                assert block.skip is None or len(block.skip) > 10, f"{block.name}: doc-skip needs a reason"
