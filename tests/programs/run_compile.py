"""Run the ``torch.compile`` programs of ``compile_programs.py`` and write ``compile_<mode>.json`` into OUT_DIR.

    python tests/programs/run_compile.py ddp OUT_DIR        # one of 2 Gloo ranks (RANK, WORLD_SIZE, MASTER_*)
    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/run_compile.py multidev OUT_DIR

``ddp`` imports no multidev: each rank wraps the model in DistributedDataParallel and trains on its
half of each global batch. ``multidev`` trains each program eagerly on one device (the reference) and
on MirroredStrategy's 2 replicas. Every program starts from ``torch._dynamo.reset()``; the number of
graphs dynamo compiled is recorded after each step (``counters["stats"]["unique_graphs"]``).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import sysconfig
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_programs import GLOBAL_BATCH, PROGRAMS, batches, parameters  # noqa: E402
from process_exit import leave_process_group  # noqa: E402


def has_c_compiler() -> bool:
    """Inductor's CPU code needs a C++ compiler (``CXX`` or the one Python was built with, else g++)."""
    names = [os.environ.get("CXX"), (sysconfig.get_config_var("CXX") or "").split(" ")[0], "g++", "c++", "clang++"]
    return any(name and shutil.which(name) for name in names)


def _fresh(program) -> Any:
    torch._dynamo.reset()
    counters.clear()
    return torch._dynamo.config.patch(**program.dynamo_config)


def _result(params: list, graphs: list, extra: dict) -> dict:
    return dict(extra, graphs=graphs, params=[p.detach().double().reshape(-1).tolist() for p in params])


def _recorded(run, *args) -> dict:
    try:
        return run(*args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        return {"error": f"{type(e).__name__}: {e}"}


def run_ddp(program, rank: int, world: int) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    with _fresh(program):
        state = program.build()
        state["model"] = DDP(state["model"])
        program.prepare(state, True)
        graphs = []
        for batch in batches(program.batch_sizes):
            program.step(state, tuple(torch.tensor_split(t, world)[rank] for t in batch))
            graphs.append(counters["stats"]["unique_graphs"])
    flat = torch.cat([p.detach().reshape(-1) for p in parameters(state)])
    first = flat.clone()
    dist.broadcast(first, src=0)
    return _result(parameters(state), graphs, {"rank_spread": float((flat - first).abs().max())})


def one_device(program) -> dict:
    state = program.build()
    program.prepare(state, False)
    for batch in batches(program.batch_sizes):
        program.step(state, batch)
    return _result(parameters(state), [], {})


def on_strategy(program, strategy) -> dict:
    import multidev as md

    with _fresh(program):
        with strategy.scope():
            state = program.build()
        program.prepare(state, True)
        graphs = []
        for batch in batches(program.batch_sizes):
            parts = tuple(md.distribute.PerReplica(tuple(torch.tensor_split(t, 2))) for t in batch)
            strategy.run(program.step, args=(state, parts))
            graphs.append(counters["stats"]["unique_graphs"])
    copies = [p.values for p in parameters(state)]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    return _result([c[0] for c in copies], graphs, {"replica_spread": spread})


def _selected(multidev: bool) -> list:
    inductor = has_c_compiler()
    return [p for p in PROGRAMS if (multidev or not (p.multidev_only or p.inductor)) and (inductor or not p.inductor)]


def main(mode: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    if mode == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        rank, world = dist.get_rank(), dist.get_world_size()
        results = {p.name: _recorded(run_ddp, p, rank, world) for p in _selected(False)}
        if rank == 0:
            _write(out_dir, "ddp", results)
        leave_process_group()
        return
    import multidev as md

    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2 and GLOBAL_BATCH % 2 == 0, strategy.num_replicas_in_sync
    results = {p.name: {"one_device": _recorded(one_device, p), "multidev": _recorded(on_strategy, p, strategy)}
               for p in _selected(True)}
    _write(out_dir, "multidev", dict(results, has_c_compiler=has_c_compiler()))


def _write(out_dir: str, mode: str, results: dict) -> None:
    with open(os.path.join(out_dir, f"compile_{mode}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
