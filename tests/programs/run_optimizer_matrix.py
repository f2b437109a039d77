"""Run every case of ``optimizer_matrix.py`` and write its results as JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python run_optimizer_matrix.py OUT_DIR   # one device and MirroredStrategy
    TF_CONFIG=.. MULTIDEV_JOB_SECRET=.. python run_optimizer_matrix.py OUT_DIR   # a MultiWorkerMirroredStrategy worker
    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python run_optimizer_matrix.py OUT_DIR   # a DDP rank

A case's result: its losses and the lrs read in the step (each replica's or rank's), the groups'
hyperparameters after each step, the final weights and optimizer state; or the error it raised.
The DDP mode imports no multidev.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optimizer_matrix import CASES, batches, optimizer_record, parameters  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

if os.environ.get("OPTIMIZER_MATRIX_CASES"):   # a comma-separated subset, to look at a few cases by hand
    CASES = [c for c in CASES if c.name in os.environ["OPTIMIZER_MATRIX_CASES"].split(",")]

F64 = torch.float64


def _flat(tensors) -> list:
    return [t.detach().to_dense().double().reshape(-1).tolist() for t in tensors]


def _train(case, state, step_fn, scope=contextlib.nullcontext) -> dict:
    """The case's loop: ``step_fn(batch, i) -> (loss, [lr read by each replica])``, ``after`` between steps
    (in ``scope()``: the strategy's, as a program's epoch end runs there)."""
    losses, lrs, groups = [], [], []
    for i, batch in enumerate(batches()):
        loss, read = step_fn(batch, torch.tensor(float(i), dtype=F64))
        losses.append(loss)
        lrs.append(read)
        if case.after is not None:
            with scope():
                case.after(state, i)
        groups.append({k: v["groups"] for k, v in optimizer_record(state).items()})
    return {"losses": losses, "lrs": lrs, "groups": groups, "params": _flat(parameters(state)),
            "optimizer": optimizer_record(state)}


def one_device(case) -> dict:
    state = case.build()

    def step(batch, i):
        loss, lr = case.step(state, batch, i)
        return float(loss), [float(lr)]
    return _train(case, state, step)


def on_strategy(case, strategy) -> dict:
    """The case on ``strategy``'s local replicas (this worker's slices of each global batch); replica
    0's weights, the user's optimizer's state, and how far every local replica's weights and every
    twin's state are from replica 0's."""
    import multidev as md
    from multidev.distribute.optimizer_hooks import replica_optimizer

    with strategy.scope():
        state = case.build()
    n, k, offset = strategy.num_replicas_in_sync, strategy.extended.num_local_replicas, strategy.extended.replica_offset

    def step(batch, i):
        parts = tuple(md.distribute.PerReplica(tuple(torch.tensor_split(t, n)[offset:offset + k])) for t in batch)
        loss, lr = strategy.run(case.step, args=(state, parts, i))
        return float(strategy.reduce("MEAN", loss, axis=None)), [float(v) for v in strategy.experimental_local_results(lr)]

    result = _train(case, state, step, strategy.scope)
    copies = [p.values for p in parameters(state)]
    result["replica_spread"] = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    result["state_spread"] = _state_spread(state, replica_optimizer, k)
    return result


def _state_spread(state, replica_optimizer, num_local: int) -> float:
    """How far any local replica's optimizer state (its twin's) is from replica 0's."""
    spread = 0.0
    for key in ("opt", "opt2"):
        if key not in state:
            continue
        twins = [replica_optimizer(state[key], r) for r in range(num_local)]
        for other in twins[1:]:
            pairs = [pair for g0, g1 in zip(twins[0].param_groups, other.param_groups)
                     for pair in zip(g0["params"], g1["params"])]
            for p0, p1 in pairs:
                for k, v in twins[0].state.get(p0, {}).items():
                    w = other.state[p1][k]
                    if isinstance(v, torch.Tensor) and v.numel():
                        spread = max(spread, float((v.double() - w.double()).abs().max()))
    return spread


def ddp(case, rank: int, world: int) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    state = case.build()
    state["model"] = DDP(state["model"])

    def step(batch, i):
        loss, lr = case.step(state, tuple(torch.tensor_split(t, world)[rank] for t in batch), i)
        every = torch.stack([loss.detach(), lr]).clone()
        gathered = [torch.empty_like(every) for _ in range(world)]
        dist.all_gather(gathered, every)
        return float(sum(g[0] for g in gathered)) / world, [float(g[1]) for g in gathered]

    result = _train(case, state, step)
    flat = torch.cat([torch.tensor(p, dtype=F64) for p in result["params"]])
    first = flat.clone()
    dist.broadcast(first, src=0)
    spread = (flat - first).abs().max()
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    result["rank_spread"] = float(spread)
    return result


def _recorded(run, *args) -> dict:
    try:
        return run(*args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        return {"error": f"{type(e).__name__}: {e}"}


def _all_reduce(case, strategy) -> dict:
    """The case with no optimizer split across replicas: every replica sums the gradients and updates
    its own copies from its own state (the plan of GPUs and of several processes)."""
    from multidev.distribute import replica_update

    split = set(replica_update.ELEMENTWISE)
    replica_update.ELEMENTWISE.clear()
    try:
        return on_strategy(case, strategy)
    finally:
        replica_update.ELEMENTWISE.update(split)


def _multidev_results() -> dict:
    """One device's result, and each of multidev's update plans on 2 replicas: split (ZeRO-1), all-reduce,
    CentralStorageStrategy's shared storage."""
    import multidev as md
    mirrored = md.distribute.MirroredStrategy()
    central = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    assert mirrored.num_replicas_in_sync == central.num_replicas_in_sync == 2
    return {c.name: {"one_device": _recorded(one_device, c), "split": _recorded(on_strategy, c, mirrored),
                     "all_reduce": _recorded(_all_reduce, c, mirrored),
                     "central_storage": _recorded(on_strategy, c, central)}
            for c in CASES}


def _worker_results() -> tuple[dict, str]:
    """Each case on this worker of MultiWorkerMirroredStrategy; the workers agree on which cases failed."""
    import multidev as md
    options = md.distribute.experimental.CommunicationOptions(timeout_seconds=30)
    strategy = md.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    ext = strategy.extended
    results = {}
    for c in CASES:
        result = _recorded(on_strategy, c, strategy)
        print(c.name, result.get("error", "ok")[:300], flush=True)   # the job's log says where a case failed
        failed = torch.tensor([float("error" in result)], dtype=F64)
        if int(ext.worker_collective.sum(failed)) not in (0, ext.num_workers):
            result = dict(result, error=result.get("error", "another worker raised"), asymmetric=True)
        results[c.name] = result
    return results, f"mwms_{ext.num_local_replicas}x{ext.num_workers}_w{ext.worker_index}.json"


def main(out_dir: str) -> None:
    if "TF_CONFIG" in os.environ:
        results, name = _worker_results()
    elif "RANK" not in os.environ:
        results = _multidev_results()
        name = "multidev.json"
    else:
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank, world = dist.get_rank(), dist.get_world_size()
        results = {c.name: _recorded(ddp, c, rank, world) for c in CASES}
        _write(out_dir, f"ddp{rank}.json", results)
        leave_process_group()
    _write(out_dir, name, results)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
