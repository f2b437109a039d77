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
from programs import GLOBAL_BATCH, parameters_of  # noqa: E402
from idioms import ALL_PROGRAMS  # noqa: E402

PR = md.distribute.PerReplica
TIMEOUT_S = 30


def _local_carry(structure, strategy):
    """This worker's replicas' initial carries (a replica's slice each), as PerReplica leaves."""
    if structure is None:
        return None
    k = strategy.extended.num_local_replicas
    return tuple(PR(tuple(p.clone() for _ in range(k))) for p in structure)


def _my_slices(batch, strategy):
    """This worker's replicas' slices of a global batch (global replica ``offset + r`` gets slice
    ``offset + r`` of ``num_replicas_in_sync``, as ``experimental_distribute_dataset`` splits it)."""
    ext = strategy.extended
    n, k, offset = strategy.num_replicas_in_sync, ext.num_local_replicas, ext.replica_offset
    return tuple(PR(tuple(torch.tensor_split(t, n)[offset:offset + k])) for t in batch)


def on_workers(program, strategy) -> dict:
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
    params = parameters_of(program, state)
    copies = [p.values for p in params]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    return {"losses": losses, "observed": observed, "replica_spread": spread,
            "params": [c[0].detach().double().reshape(-1).tolist() for c in copies]}


def _recorded(program, strategy) -> dict:
    """The program's result, or the error it raised (the test says whether one was expected)."""
    try:
        result = on_workers(program, strategy)
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
    name = f"mwms_{ext.num_local_replicas}x{ext.num_workers}_w{ext.worker_index}.json"
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
