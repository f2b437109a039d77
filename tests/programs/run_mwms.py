"""Run every program of ``programs.py`` on MultiWorkerMirroredStrategy: this process is one of the
workers of a loopback cluster (TF_CONFIG in the environment), with MULTIDEV_LOGICAL_CPUS local
replicas; it trains on its replicas' slices of each global batch and writes
``mwms_<local>x<workers>_w<index>.json`` into the directory given as argument.

    TF_CONFIG=... MULTIDEV_LOGICAL_CPUS=2 python tests/programs/run_mwms.py OUT_DIR

Every case ends with the workers meeting (``_agreed``): a case that raised on one worker only is
recorded as such on both, so the next case starts together.
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multidev as md  # noqa: E402
from idioms import ALL_PROGRAMS  # noqa: E402
from run_multidev import on_strategy  # noqa: E402   (the same loop as MirroredStrategy's)
from tutorial_port import run_cases  # noqa: E402

TIMEOUT_S = 30


def _recorded(program, strategy) -> dict:
    """The program's result, or the error it raised (the test says whether one was expected)."""
    try:
        result = on_strategy(program, strategy)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        result = {"error": f"{type(e).__name__}: {e}"}
    return _agreed(result, strategy)


def _recorded_call(fn, strategy, *args) -> dict:
    """``fn(strategy, *args)``'s result or error, agreed between the workers."""
    try:
        result = fn(strategy, *args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        result = {"error": f"{type(e).__name__}: {e}"}
    return _agreed(result, strategy)


def _agreed(result: dict, strategy) -> dict:
    """The workers meet after each case: a worker that failed where another did not is recorded."""
    failed = torch.tensor([float("error" in result)], dtype=torch.float64)
    workers_failed = int(strategy.extended.worker_collective.sum(failed))
    if workers_failed not in (0, strategy.extended.num_workers):
        result = dict(result, error=result.get("error", f"only {workers_failed} worker(s) raised"),
                      asymmetric=True)
    return result


def main(out_dir: str) -> None:
    options = md.distribute.experimental.CommunicationOptions(timeout_seconds=TIMEOUT_S)
    strategy = md.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    ext = strategy.extended
    results = {program.name: _recorded(program, strategy) for program in ALL_PROGRAMS}
    results["tutorial"] = run_cases(strategy, out_dir, _recorded_call)
    name = f"mwms_{ext.num_local_replicas}x{ext.num_workers}_w{ext.worker_index}.json"
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
