"""Run the self-supervised programs (``ssl_programs.py``, ``ssl_simclr.py``, ``ssl_programs2.py``) under
one runner:

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python tests/programs/run_ssl.py ddp OUT_DIR
    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/run_ssl.py multidev OUT_DIR
    TF_CONFIG=.. MULTIDEV_LOGICAL_CPUS=1 python tests/programs/run_ssl.py mwms OUT_DIR

``ddp``: this process is one of 2 Gloo ranks (``run_ddp.py``'s loop, no multidev imported); rank 0
writes ``ssl_ddp.json``. ``multidev``: one device and MirroredStrategy (2 logical CPUs) in this
interpreter (``run_multidev.py``'s loops), with ``ssl_port.py``'s collectives in place of
torch.distributed's; writes ``ssl_multidev.json``. ``mwms``: a MultiWorkerMirroredStrategy worker
(``run_mwms.py``'s loop); writes ``ssl_mwms_w<index>.json``. ``SSL_ONLY=name,name`` in the environment
runs those programs only (to debug one).
"""
from __future__ import annotations

import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ssl_programs  # noqa: E402
import ssl_programs2  # noqa: E402
import ssl_simclr  # noqa: E402
from process_exit import leave_process_group  # noqa: E402

PROGRAMS = ssl_programs.SSL_PROGRAMS + ssl_simclr.SSL_SIMCLR + ssl_programs2.SSL_PROGRAMS2
MODULES = (ssl_programs, ssl_simclr, ssl_programs2)   # whose torch.distributed lines ssl_port.py replaces
if os.environ.get("SSL_ONLY"):
    PROGRAMS = [p for p in PROGRAMS if p.name in os.environ["SSL_ONLY"].split(",")]


def _ddp(out_dir: str) -> None:
    import torch.distributed as dist
    from run_ddp import _recorded
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {program.name: _recorded(program, rank, world) for program in PROGRAMS}
    if rank == 0:
        _write(out_dir, "ssl_ddp.json", results)
    leave_process_group()


def _multidev(out_dir: str) -> None:
    import multidev as md
    import ssl_port
    from run_multidev import _recorded, on_strategy, one_device
    ssl_port.install(*MODULES)
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    results = {program.name: {"one_device": _recorded(one_device, program),
                              "multidev": _recorded(on_strategy, program, strategy)} for program in PROGRAMS}
    results["all_gather_gradient"] = _recorded(_gather_gradients, strategy)
    results["buffer_of_module_built_in_step"] = _recorded(_buffer_of_module_built_in_step, strategy)
    results["data_assign_differing"] = _recorded(_data_assign_differing, strategy)
    _write(out_dir, "ssl_multidev.json", results)


def _gather_gradients(strategy) -> dict:
    """Each replica's gradient of its own inputs through ``all_gather`` of uneven lengths: along axis
    0 (one tensor) and along axis 1 (a tuple, with a leaf that needs no gradient), replica ``r``'s loss
    weighting the gathered values by ``coefficients(r)``."""
    import multidev as md
    import torch

    def step():
        ctx = md.distribute.get_replica_context()
        r = int(ctx.replica_id_in_sync_group)
        rows = torch.arange(2.0 * (r + 1), dtype=torch.float64).reshape(r + 1, 2).requires_grad_(True)
        cols = torch.ones(3, r + 1, dtype=torch.float64, requires_grad=True)
        fixed = torch.zeros(3, 2, dtype=torch.float64)
        g_rows = ctx.all_gather(rows, axis=0)
        g_cols, g_fixed = ctx.all_gather((cols, fixed), axis=1)
        loss = (g_rows * _coefficients(r, g_rows.shape)).sum() + (g_cols * _coefficients(r, g_cols.shape)).sum()
        loss = loss + g_fixed.sum()
        d_rows, d_cols = torch.autograd.grad(loss, [rows, cols])
        return d_rows, d_cols, torch.tensor(list(g_rows.shape) + list(g_cols.shape) + list(g_fixed.shape))

    out = strategy.run(step)
    return {name: [t.tolist() for t in strategy.experimental_local_results(v)]
            for name, v in zip(("rows", "cols", "shapes"), out)}


def _coefficients(r: int, shape) -> "torch.Tensor":
    import torch
    return (torch.arange(float(shape.numel()), dtype=torch.float64) + 1).reshape(shape) * 10.0 ** r


def _data_assign_differing(strategy) -> dict:
    """``p.data = t`` inside the step: each replica's own copy (equal values pass, twice); values that
    differ between replicas raise after the run, as any write in the replicas that drifts."""
    import multidev as md
    import torch

    with strategy.scope():
        layer = torch.nn.Linear(2, 2).double()

    def same(p):
        p.data = p.data * 0.5 + 1.0

    def differing(p):
        p.data = p.data + float(md.distribute.get_replica_context().replica_id_in_sync_group)

    before = layer.bias.detach().clone()
    strategy.run(same, args=(layer.bias,))
    strategy.run(same, args=(layer.bias,))
    copies = [c.tolist() for c in strategy.experimental_local_results(layer.bias)]
    try:
        strategy.run(differing, args=(layer.bias,))
        error = ""
    except ValueError as e:
        error = str(e)
    return {"expected": ((before * 0.5 + 1.0) * 0.5 + 1.0).tolist(), "copies": copies, "error": error}


def _buffer_of_module_built_in_step(strategy) -> dict:
    """A DINOLoss built inside the step is the replica's own: its center moves once per step."""
    import torch

    def step(t):
        loss = ssl_programs2.DINOLoss(4, 3, 0.04, 0.07, 2, 4).double()
        loss.update_center(t)
        loss.update_center(t)
        return loss.center.clone()

    import multidev as md
    t = md.distribute.PerReplica((torch.ones(2, 4, dtype=torch.float64), 3 * torch.ones(2, 4, dtype=torch.float64)))
    return {"center": [c.tolist() for c in strategy.experimental_local_results(strategy.run(step, args=(t,)))]}


def _mwms(out_dir: str) -> None:
    import multidev as md
    import ssl_port
    from run_mwms import TIMEOUT_S, _recorded
    ssl_port.install(*MODULES)
    options = md.distribute.experimental.CommunicationOptions(timeout_seconds=TIMEOUT_S)
    strategy = md.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    results = {program.name: _recorded(program, strategy) for program in PROGRAMS}
    _write(out_dir, f"ssl_mwms_w{strategy.extended.worker_index}.json", results)


def _write(out_dir: str, name: str, results: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    {"ddp": _ddp, "multidev": _multidev, "mwms": _mwms}[sys.argv[1]](sys.argv[2])
