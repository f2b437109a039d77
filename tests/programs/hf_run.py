"""Run ``hf_models.py``'s programs and write their results as JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/hf_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/hf_run.py OUT_DIR   # a DDP rank

The multidev run is the port docs/ddp_port.md describes: model, optimizer and scheduler built in
``strategy.scope()``, the tutorial's DataLoader through ``experimental_distribute_dataset`` and the
loop body in ``strategy.run``; after training, ``evaluate`` outside ``strategy.run`` and the trained
model's ``save_pretrained`` / ``from_pretrained`` round trip. The DDP run imports no multidev.
"""
from __future__ import annotations

import datetime
import functools
import json
import os
import sys
import tempfile
import traceback
from typing import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_models import F64, HF_PROGRAMS, evaluate, pretrained_dirs, train_step  # noqa: E402
from process_exit import leave_process_group  # noqa: E402


def _flat(params) -> list:
    return [p.detach().double().reshape(-1).tolist() for p in params]


def _evaluation(program, model) -> dict:
    logits, tokens = evaluate(program, model, program.eval_batch())
    return {"logits": logits.reshape(-1).tolist(), "tokens": None if tokens is None else tokens.tolist()}


def _evaluation_in_run(program, model, strategy) -> dict:
    """The evaluation as each DDP rank runs it on its share of the batch (``strategy.run``), gathered."""
    halves = {k: strategy.experimental_distribute_values_from_function(
        lambda ctx, v=v: torch.tensor_split(v, ctx.num_replicas_in_sync)[ctx.replica_id_in_sync_group])
        for k, v in program.eval_batch().items()}
    logits, tokens = strategy.run(lambda batch: evaluate(program, model, batch), args=(halves,))
    tokens = None if tokens is None else strategy.gather(tokens, axis=0).tolist()
    return {"logits": strategy.gather(logits, axis=0).reshape(-1).tolist(), "tokens": tokens}


def _tied(model) -> bool:
    """Whether the output head shares the token embedding's tensor (GPT-2's, T5's)."""
    head = model.get_output_embeddings()
    return head is not None and head.weight is model.get_input_embeddings().weight


def _loader(program) -> torch.utils.data.DataLoader:
    """The tutorial's ``train_dataloader``, over global batches already collated (padded)."""
    return torch.utils.data.DataLoader(program.batches(), batch_size=None)


def _step(program, sum_across, replicas: int):
    """The program's loop body, told how to sum across ranks where it does (``train_step_global_tokens``)."""
    if program.step is None:
        return train_step
    return functools.partial(program.step, sum_across=sum_across, replicas=replicas)


def _replica_sum(t: torch.Tensor) -> torch.Tensor:
    import multidev as md
    return md.distribute.get_replica_context().all_reduce("sum", t)


def _rank_sum(t: torch.Tensor) -> torch.Tensor:
    torch.distributed.all_reduce(t)
    return t


def _recorded(run, *args) -> dict:
    """``run(*args)``'s result, or the error it raised (the test reports it)."""
    try:
        return run(*args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        traceback.print_exc()   # in the process's log, which the test shows on failure
        return {"error": f"{type(e).__name__}: {e}"}


def one_device(program) -> dict:
    """The whole global batch on one device (a reference where there is no dropout and the loss is
    the global batch's mean)."""
    state = program.build()
    step = _step(program, lambda t: t, 1)
    losses = [float(step(state, batch)) for batch in _loader(program)]
    return {"losses": losses, "params": _flat(state[0].parameters()), "evaluation": _evaluation(program, state[0])}


def on_strategy(program, strategy) -> dict:
    """The port on ``strategy``'s replicas; replica 0's weights, then evaluation and the round trip."""
    with strategy.scope():
        state = program.build()
    model = state[0]
    losses = []
    for batch in strategy.experimental_distribute_dataset(_loader(program)):
        loss = strategy.run(_step(program, _replica_sum, strategy.num_replicas_in_sync), args=(state, batch))
        losses.append(float(strategy.reduce("MEAN", loss, axis=None)))
    copies = [p.values for p in model.parameters()]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    result = {"losses": losses, "replica_spread": spread, "tied": _tied(model), "params": _flat(c[0] for c in copies),
              "evaluation": _evaluation(program, model),
              "evaluation_in_run": _evaluation_in_run(program, model, strategy)}
    with tempfile.TemporaryDirectory() as path:
        model.save_pretrained(path)
        loaded = program.model_class.from_pretrained(path, dtype=F64)
        result["reloaded_params"] = _flat(loaded.parameters())
        result["reloaded_evaluation"] = _evaluation(program, loaded)
    return result


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    results = {p.name: {"multidev": _recorded(on_strategy, p, strategy)} for p in HF_PROGRAMS}
    for p in HF_PROGRAMS:
        if p.one_device_equal:
            results[p.name]["one_device"] = _recorded(one_device, p)
    with open(os.path.join(out_dir, "hf_multidev.json"), "w") as f:
        json.dump(results, f)


def ddp(program, rank: int, world: int) -> dict:
    """The tutorial's loop on this rank's half of each global batch, the model wrapped in DDP."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    model, optimizer, lr_scheduler = program.build()
    state = (DDP(model), optimizer, lr_scheduler)
    step = _step(program, _rank_sum, world)
    losses = []
    for batch in _loader(program):   # its iterator draws a base seed, as multidev's does
        mine = {k: torch.tensor_split(v, world)[rank] for k, v in batch.items()}
        total = step(state, mine).clone()
        torch.distributed.all_reduce(total)
        losses.append(float(total) / world)
    return {"losses": losses, "params": _flat(model.parameters()), "evaluation": _evaluation(program, model),
            "tied": _tied(model)}


def main_ddp(out_dir: str, programs: list = HF_PROGRAMS, run: Callable = None, file: str = "hf_ddp.json",
             download: Callable = pretrained_dirs) -> None:
    """Each program through ``run`` (``ddp``) on this rank, rank 0 writing the results to ``file``."""
    dist = torch.distributed
    download()   # "downloaded" before the job: transformers' save_pretrained writes on rank 0 only
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {p.name: _recorded(run or ddp, p, rank, world) for p in programs}
    if rank == 0:
        with open(os.path.join(out_dir, file), "w") as f:
            json.dump(results, f)
    leave_process_group()


if __name__ == "__main__":
    (main_ddp if "RANK" in os.environ else main_multidev)(sys.argv[1])   # launched as a rank: DDP
