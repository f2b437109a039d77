"""Run every program of ``programs.py`` on one device and on MirroredStrategy (2 logical CPUs), in one
fresh interpreter; write ``multidev.json`` into the directory given as argument.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/run_multidev.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multidev as md  # noqa: E402
from programs import GLOBAL_BATCH, parameters_of  # noqa: E402
from idioms import ALL_PROGRAMS  # noqa: E402

PR = md.distribute.PerReplica


def one_device(program) -> dict:
    state = program.build()
    carry = program.initial_carry(GLOBAL_BATCH)
    losses, observed = [], []
    for i, batch in enumerate(program.batches()):
        loss, carry = program.step(state, batch, carry)
        losses.append(float(loss))
        if program.after_step is not None:
            program.after_step(state, i)
        if program.observe is not None:
            observed.append(program.observe(state))
    return {"losses": losses, "observed": observed,
            "params": [p.detach().double().reshape(-1).tolist() for p in parameters_of(program, state)]}


def _per_replica(structure, n):
    """The initial carry of each replica (one half-batch carry each), as PerReplica leaves."""
    if structure is None:
        return None
    parts = [program_carry for program_carry in structure]
    return tuple(PR(tuple(p.clone() for _ in range(n))) for p in parts)


def on_strategy(program, strategy) -> dict:
    n = strategy.num_replicas_in_sync
    with strategy.scope():
        state = program.build()
    carry = _per_replica(program.initial_carry(GLOBAL_BATCH // n), n)
    losses, observed = [], []
    for i, batch in enumerate(program.batches()):
        parts = tuple(PR(tuple(torch.tensor_split(t, n))) for t in batch)
        loss, carry = strategy.run(program.step, args=(state, parts, carry))
        losses.append(float(strategy.reduce("MEAN", loss, axis=None)))
        if program.after_step is not None:
            with strategy.scope():
                program.after_step(state, i)
        if program.observe is not None:
            observed.append(program.observe(state))
    params = parameters_of(program, state)
    spread = max(float((p.values[r] - p.values[0]).detach().abs().max()) for p in params for r in range(n))
    return {"losses": losses, "observed": observed, "replica_spread": spread,
            "params": [p.values[0].detach().double().reshape(-1).tolist() for p in params]}


def _recorded(run, *args) -> dict:
    """``run(*args)``'s result, or the error it raised (the test says whether one was expected)."""
    try:
        return run(*args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        return {"error": f"{type(e).__name__}: {e}"}


def main(out_dir: str) -> None:
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    results = {}
    for program in ALL_PROGRAMS:
        results[program.name] = {"one_device": _recorded(one_device, program),
                                 "multidev": _recorded(on_strategy, program, strategy)}
    with open(os.path.join(out_dir, "multidev.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
