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
import tutorial  # noqa: E402
from tutorial_port import run_cases  # noqa: E402

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


def _local_carry(structure, strategy):
    """This process's replicas' initial carries (a replica's slice each), as PerReplica leaves."""
    if structure is None:
        return None
    k = strategy.extended.num_local_replicas
    return tuple(PR(tuple(p.clone() for _ in range(k))) for p in structure)


def _my_slices(batch, strategy):
    """This process's replicas' slices of a global batch: global replica ``offset + r`` gets slice
    ``offset + r`` of ``num_replicas_in_sync``, as ``experimental_distribute_dataset`` splits it (one
    process: every slice; a worker of MultiWorkerMirroredStrategy: its replicas')."""
    ext = strategy.extended
    n, k, offset = strategy.num_replicas_in_sync, ext.num_local_replicas, ext.replica_offset
    return tuple(PR(tuple(torch.tensor_split(t, n)[offset:offset + k])) for t in batch)


def on_strategy(program, strategy) -> dict:
    """The program on ``strategy``'s replicas (this process's, of any worker); replica 0's weights."""
    with strategy.scope():
        state = program.build()
    carry = _local_carry(program.initial_carry(GLOBAL_BATCH // strategy.num_replicas_in_sync), strategy)
    losses, observed = [], []
    for i, batch in enumerate(program.batches()):
        loss, carry = strategy.run(program.step, args=(state, _my_slices(batch, strategy), carry))
        losses.append(float(strategy.reduce("MEAN", loss, axis=None)))
        if program.after_step is not None:
            with strategy.scope():
                program.after_step(state, i)
        if program.observe is not None:
            observed.append(program.observe(state))
    copies = [p.values for p in parameters_of(program, state)]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    return {"losses": losses, "observed": observed, "replica_spread": spread,
            "params": [c[0].detach().double().reshape(-1).tolist() for c in copies]}


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
    results["tutorial"] = dict(run_cases(strategy, out_dir, _recorded), one_device=tutorial.one_device(),
                               one_device_1=tutorial.one_device(1),   # one worker: its sampler has every example
                               one_device_no_set_epoch=tutorial.one_device(set_epoch=False),
                               one_device_in_order=tutorial.one_device_in_order(8))
    with open(os.path.join(out_dir, "multidev.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
