"""Runs a seed's code cells in order in one fresh interpreter, as a notebook kernel does, and splits
what each cell printed (stdout and stderr) so that one test per cell checks that cell's output.

A cell that raises prints its traceback into its own output and the next cells still run (as when
each cell is run by hand), so one broken cell fails its own test, not every test after it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

MARK = "### seed cell "

_RUNNER = '''
import sys, traceback
CELLS = {cells!r}
namespace = {{"__name__": "__main__"}}
for name, code in CELLS:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        print({mark!r} + name, file=stream, flush=True)
    try:
        exec(compile(code, "<seed cell " + name + ">", "exec"), namespace)
    except BaseException:
        traceback.print_exc(file=sys.stdout)
    sys.stdout.flush(); sys.stderr.flush()
'''


def run_cells(cells, *, cwd, preamble: str = "", env: dict | None = None, timeout: float = 300) -> dict:
    """``{cell name: (stdout, stderr)}`` of ``cells`` (``[(name, code)]``) run after ``preamble``."""
    full_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    OMP_NUM_THREADS="1", **(env or {}))
    program = preamble + "\n" + _RUNNER.format(cells=list(cells), mark=MARK)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=str(cwd))
    outputs = {name: ["", ""] for name, _ in cells}
    for index, text in enumerate((proc.stdout, proc.stderr)):
        for part in text.split(MARK)[1:]:
            name, _, body = part.partition("\n")
            outputs[name][index] = body
    if proc.returncode != 0:
        raise AssertionError(f"the seed's kernel died (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return {name: tuple(v) for name, v in outputs.items()}


def assert_ran(output) -> None:
    """The cell raised nothing (its traceback would be in its stdout)."""
    out, err = output
    assert "Traceback (most recent call last)" not in out, out + err


TQDM_STAND_IN = '''
import importlib.machinery, sys, types
try:
    import tqdm.notebook  # noqa: F401
    import ipywidgets  # noqa: F401  (tqdm.notebook's bars need it: tqdm alone comes with transformers)
except ImportError:   # the notebook's progress bar; not installed here: an identity stand-in
    _t, _n = types.ModuleType("tqdm"), types.ModuleType("tqdm.notebook")
    _t.__spec__, _n.__spec__ = importlib.machinery.ModuleSpec("tqdm", None), importlib.machinery.ModuleSpec("tqdm.notebook", None)
    _n.tqdm = lambda iterable, *args, **kwargs: iterable
    _t.notebook = _n
    sys.modules["tqdm"], sys.modules["tqdm.notebook"] = _t, _n
'''
