"""The entry point a ``*_run.py`` of this directory shares: run its programs the way this process was started
and write their results as JSON into the directory given (``run_three_ways`` in test_pytutorials.py reads them).

- a worker of ``multidev launch --workers 2`` (``TF_CONFIG``): MultiWorkerMirroredStrategy,
  ``<prefix>_worker<i>.json``;
- a DDP rank (``RANK``; imports no multidev): Gloo, rank 0 writes ``<prefix>_ddp.json``, every rank leaves
  through ``leave_process_group``;
- one process: MirroredStrategy over the 2 logical CPUs the test configures, ``<prefix>_multidev.json``.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Callable

import torch

from process_exit import leave_process_group
from pytutorials_run import _recorded


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


def _results(programs: dict, port) -> dict:
    return {name: _recorded(program, port) for name, program in programs.items()}


def only(programs: dict, variable: str) -> dict:
    """``programs``, or those named in the environment variable ``variable`` (``name,name``: to debug one)."""
    names = os.environ.get(variable)
    return {name: programs[name] for name in names.split(",")} if names else programs


def run_main(prefix: str, programs: dict, mirrored_port: Callable, ddp_port: Callable) -> None:
    """``programs`` (name -> program) through ``mirrored_port(strategy)`` or ``ddp_port()``, as started."""
    out_dir = sys.argv[1]
    if "TF_CONFIG" in os.environ:
        import multidev as md
        port = mirrored_port(md.distribute.MultiWorkerMirroredStrategy())
        _write(out_dir, f"{prefix}_worker{port.strategy.extended.worker_index}.json", _results(programs, port))
    elif "RANK" in os.environ:
        torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        port = ddp_port()
        results = _results(programs, port)
        if port.rank == 0:
            _write(out_dir, f"{prefix}_ddp.json", results)
        leave_process_group()
    else:
        import multidev as md
        port = mirrored_port(md.distribute.MirroredStrategy())
        assert port.strategy.num_replicas_in_sync == 2, port.strategy.num_replicas_in_sync
        _write(out_dir, f"{prefix}_multidev.json", _results(programs, port))
