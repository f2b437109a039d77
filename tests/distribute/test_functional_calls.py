"""``torch.func.functional_call`` inside ``strategy.run`` (``distribute/functional_calls.py``): the tensors it
swaps in are the calling replica's for the duration of its call, the module's weights are never written,
nested calls stack, a reassigned tensor comes back through the caller's dict as torch gives it; and a
``torch.jit.script``-ed module trains nowhere on replicas but scripts for inference after training
(``distribute/scripted_modules.py``). The programs that need them: ``tests/programs/test_torchfunc.py``."""
from __future__ import annotations

import os

from tests.conftest import ROOT, run_fresh

PROGRAM = os.path.join(ROOT, "tests", "distribute", "_functional_calls_program.py")


def test_functional_call_swaps_for_the_calling_replica_and_scripted_modules_are_refused():
    out = run_fresh(f"import runpy; runpy.run_path({PROGRAM!r})", env={"MULTIDEV_LOGICAL_CPUS": "2"}).stdout
    assert out.split() == "own tensors ok nested ok inner step ok refusals ok scripted ok".split(), out
