"""``torch.compile`` idioms of PyTorch 2 programs (``compile_programs.py``) ported with two lines to
MirroredStrategy on 2 logical CPUs train as eager one-device training does (float64, to rounding) and
as DDP with the same compilation on 2 Gloo processes does, or multidev refuses them saying why; and
no program recompiles at every step (the graphs dynamo made stop growing after the second step).

A compiled optimizer step runs eagerly on replicas (``multidev/distribute/compiled_step.py``): where
torch's compiled Adam rounds its bias correction in float32 (the ``step`` tensor), DDP's weights are
1.5e-6 off eager training and multidev's are not. All multidev cases run in one fresh interpreter, the
DDP cases in one 2-process job, started together.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.conftest import ROOT
from tests.programs.compile_programs import PROGRAMS
from tests.programs.test_programs import _finish, _free_port, _load, _max_difference, _no_error

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 300
#: DDP refuses these itself: fullgraph=True over DDP's forward (dynamo cannot trace DDP's logger), and
#: compiled autograd with DDP's C++ reducer.
DDP_REFUSED = {"compiled_model_fullgraph": r"Logger", "compiled_autograd": r"not compatible with C\+\+ DDP Reducer"}
#: torch's compiled Adam/AdamW (DDP's) computes the bias correction from its float32 ``step`` tensor;
#: multidev's replicas step eagerly (a Python float): the weights differ by float32 rounding.
OPTIMIZER_ONLY = {"compiled_optimizer_step", "compiled_optimizer_step_adamw_foreach"}
COMPILED_OPTIMIZER = {"compiled_train_step", "compiled_optimizer_step", "compiled_optimizer_step_adamw_foreach"}


def _start(args: list, out_dir: str, **env: str):
    import subprocess
    import sys

    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1", **env)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "run_compile.py"), *args, out_dir], env=full, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("compile_programs"))
    port = str(_free_port())
    procs = [_start(["multidev"], out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start(["ddp"], out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port) for r in range(2)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args[2], p.returncode, log[-3000:]) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    return _load(out, "compile_multidev.json"), _load(out, "compile_ddp.json")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_compiled_program_equals_eager_and_ddp(results, program):
    ours, ddp = results
    if program.inductor and not ours["has_c_compiler"]:
        pytest.skip("inductor needs a C++ compiler (none found: CXX, g++, c++, clang++)")
    got = ours[program.name]["multidev"]
    if program.refused:   # never a silent difference: the error says why and names the fix
        assert re.search(program.refused, got.get("error", ""), re.S), got
    else:
        _no_error(got)
        assert got["replica_spread"] == 0.0, "every replica's copy is the same"
        if program.compare_one_device:
            assert _max_difference(got, _no_error(ours[program.name]["one_device"])) <= 1e-12
        graphs = got["graphs"]
        if program.name in OPTIMIZER_ONLY:   # all it compiles is the step, which runs eagerly on replicas
            assert graphs[-1] == 0, graphs
        else:
            assert graphs[0] >= 1, "dynamo compiled nothing"
        assert graphs[-1] == graphs[2], f"dynamo recompiled after the third step: graphs per step {graphs}"
    if program.multidev_only or program.inductor:   # (inductor: DDP's 2 ranks would compile it again, slowly)
        return
    theirs = ddp[program.name]
    if program.name in DDP_REFUSED:
        assert re.search(DDP_REFUSED[program.name], theirs.get("error", "")), theirs
        return
    _no_error(theirs)
    assert theirs["rank_spread"] == 0.0
    if program.refused:
        return
    tolerance = 1e-5 if program.name in COMPILED_OPTIMIZER else 1e-12
    assert _max_difference(got, theirs) <= tolerance


def test_compiled_optimizer_rounding_is_torchs_own(results):
    """The DDP reference of a compiled Adam step is off eager training by float32 rounding (torch's
    compiled Adam), not by anything multidev does: the compiled forward alone matches DDP exactly."""
    ours, ddp = results
    for name in COMPILED_OPTIMIZER:
        assert 1e-9 < _max_difference(_no_error(ddp[name]), ours[name]["one_device"]) < 1e-5, name
    assert _max_difference(ours["compiled_model"]["multidev"], ddp["compiled_model"]) <= 1e-15


def test_partial_last_batch_recompiles_once(results):
    """A partial last batch (7 over 2 replicas: 4 and 3) recompiles once, for the replica with the new
    shape; the next full batch reuses the graphs."""
    graphs = results[0]["compiled_model_partial_batch"]["multidev"]["graphs"]
    assert graphs[3] == graphs[2] == graphs[1] + 1, graphs


def test_md_function_experimental_compile_warns_and_rejects_both():
    """TensorFlow's deprecated alias: a DeprecationWarning naming jit_compile; both given: ValueError."""
    import warnings

    import multidev as md

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        md.function(lambda x: x, experimental_compile=False)
    assert any(issubclass(w.category, DeprecationWarning) and "use jit_compile" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match=r"Cannot specify both 'experimental_compile' and 'jit_compile'.*"
                                         r"experimental_compile=True, jit_compile=False"):
        md.function(lambda x: x, experimental_compile=True, jit_compile=False)

