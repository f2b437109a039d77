"""Run the keras.io ports of this directory three ways (plus md.keras's own one-device reference).

Modes (each program module has ``run(keras, strategy, workdir, scale) -> results``):
  keras3   Keras 3 (torch backend), one device (multidev's default strategy, as a TF user's default)
  md1      md.keras, one device: the reference md.keras's two replicas must equal
  md2      md.keras, MirroredStrategy over 2 logical CPUs
  k3md2    Keras 3 on multidev: the same Keras 3 program, model built in MirroredStrategy's scope
"Runs unchanged" = the program finished; "equal to one device" = md2 vs md1 and k3md2 vs keras3
agree on every result (losses, metrics, predictions) within float32 reassociation tolerances;
"copies" = how many copies the trained model's weights have (2 when the strategy really distributed it).

Run in a fresh interpreter (it configures logical devices): ``python -m tests.programs.keras._harness``
prints one JSON object; ``benchmarks/keras_programs.py`` times it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import time
import traceback

import numpy as np

PROGRAMS = sorted(f[:-3] for f in os.listdir(os.path.dirname(os.path.abspath(__file__)))
                  if f.startswith("p") and f[1:3].isdigit() and f.endswith(".py"))
MODES = ("keras3", "md1", "md2", "k3md2")
REFERENCE = {"md2": "md1", "k3md2": "keras3"}
MARKER = "KERAS_PROGRAMS_REPORT "
RTOL, ATOL = 2e-4, 2e-5   # float32: two replicas sum per-replica gradients in another order


def setup(replicas=2):
    """Import Keras 3 on torch and multidev, split the CPU into ``replicas`` logical devices."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    import multidev as md

    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * replicas)
    return keras, md


def _flatten(results, prefix=""):
    """``{name: float64 array}`` of a program's (nested) results."""
    out = {}
    items = results.items() if isinstance(results, dict) else enumerate(results)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, dict) or (isinstance(value, (list, tuple)) and value and
                                       isinstance(value[0], (dict, list, tuple))):
            out.update(_flatten(value, name + "."))
        else:
            value = value.detach().cpu().numpy() if hasattr(value, "detach") else value
            out[name] = np.asarray(value, dtype="float64")
    return out


def run_mode(program, mode, keras, md, scale=1):
    """One run: ``{"ok", "error", "seconds", "results"}``."""
    module = importlib.import_module(f"tests.programs.keras.{program}")
    front = keras if mode.startswith(("keras3", "k3")) else md.keras
    if mode.endswith("2"):
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    elif mode.endswith("1s"):   # benchmarks: a strategy of one replica (multidev's wrapping, no second thread)
        strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    else:
        strategy = md.distribute.get_strategy()
    with tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        try:
            results = module.run(front, strategy, workdir, scale)
            seconds = time.perf_counter() - start
            copies = replica_copies(results.pop("_model"))
            results = _flatten(results)
        except Exception as e:  # noqa: BLE001 - the point is to record what fails
            first = (str(e).strip().splitlines() or [""])[0][:300]
            where = traceback.extract_tb(e.__traceback__)[-1]
            return {"ok": False, "error": f"{type(e).__name__}: {first}",
                    "at": f"{os.path.basename(where.filename)}:{where.lineno}", "seconds": None, "results": {}}
        return {"ok": True, "error": None, "seconds": seconds, "copies": copies, "results": results}


def replica_copies(model) -> int:
    """How many copies the model's weights have (1: not distributed; the fewest over its weights)."""
    def copies(weight):
        values = getattr(getattr(weight, "_value", weight), "values", None)   # a distributed variable's copies
        return len(values) if isinstance(values, (list, tuple)) else 1

    counts = [copies(w) for w in model.weights]
    return min(counts) if counts else 0


def compare(ours, reference):
    """(equal?, worst relative difference, first differing key) of two runs' results."""
    if not (ours["ok"] and reference["ok"]):
        return None, None, None
    a, b = ours["results"], reference["results"]
    if a.keys() != b.keys():
        return False, None, f"keys {sorted(set(a) ^ set(b))}"
    worst, first = 0.0, None
    for key in sorted(a):
        if a[key].shape != b[key].shape:
            return False, None, f"{key}: shape {a[key].shape} vs {b[key].shape}"
        diff = np.abs(a[key] - b[key]) / (ATOL / RTOL + np.abs(b[key]))
        rel = float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0
        if rel > worst:
            worst = rel
        # NaN where one device has NaN is equal (keras.io's TemporalSoftmax divides 0 by 0 at masked steps)
        if first is None and not np.allclose(a[key], b[key], rtol=RTOL, atol=ATOL, equal_nan=True):
            first = key
    return first is None, worst, first


def run_all(programs=PROGRAMS, modes=MODES, scale=1, keras=None, md=None):
    """``{program: {mode: run}}`` plus each two-replica mode's comparison with its one-device reference."""
    report = {}
    for program in programs:
        runs = {mode: run_mode(program, mode, keras, md, scale) for mode in modes}
        for mode, ref in REFERENCE.items():
            if mode in runs and ref in runs:
                runs[mode]["equal"], runs[mode]["worst_rel"], runs[mode]["differs_at"] = compare(runs[mode], runs[ref])
        for run in runs.values():
            run["results"] = {k: v.tolist() for k, v in run["results"].items()}
        report[program] = runs
    return report


def parse(stdout: str) -> dict:
    """The report printed by ``python -m tests.programs.keras._harness``."""
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        raise ValueError(f"no {MARKER!r} line in the harness output:\n{stdout[-2000:]}")
    return json.loads(lines[-1][len(MARKER):])


def report_in_parallel(programs=PROGRAMS, parts=2, timeout=600) -> dict:
    """The report of ``programs``, run as ``parts`` interleaved slices at once, each in a fresh interpreter (each
    configures its own logical CPUs): on CI's 2 cores the slices overlap, and no interpreter nears the timeout."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("OMP_NUM_THREADS", "1")
    procs = [subprocess.Popen([sys.executable, "-m", "tests.programs.keras._harness", *programs[i::parts]], cwd=root,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(parts)]
    report = {}
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"harness slice failed (rc={proc.returncode}):\n{out[-3000:]}\n{err[-3000:]}")
            report.update(parse(out))
    finally:
        for proc in procs:
            proc.kill()
    return report


if __name__ == "__main__":
    keras, md = setup()
    selected = sys.argv[1:] or PROGRAMS
    report = run_all(selected, keras=keras, md=md)
    print("\n" + MARKER + json.dumps(report))   # programs may print: the report is the marked last line
    # The report is out: skip the interpreter's teardown. After 112 programs (their threads, Keras's and torch's
    # pools) one CI run aborted there, past the printed report ("terminate called without an active
    # exception", rc -6), which failed all 460 tests of its slice.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
