"""Run ``hf_models2.py``'s programs and write their results as JSON into the directory given.

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/hf_run2.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/hf_run2.py OUT_DIR   # a DDP rank
    multidev launch --workers 2 tests/programs/hf_run2.py OUT_DIR   # MultiWorkerMirroredStrategy

The multidev runs are the port docs/ddp_port.md describes: the model and optimizer built in
``strategy.scope()``, the loader through ``experimental_distribute_dataset`` and the loop body in
``strategy.run``; after training the evaluation outside ``strategy.run`` and the ``save_pretrained``
round trip (peft: the adapter only, reloaded with ``PeftModel.from_pretrained``). The DDP run imports
no multidev.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_run  # noqa: E402
from hf_models2 import F64, HF_PROGRAMS2, evaluate, load_base, pretrained_llama, train_step  # noqa: E402
from hf_run import _flat, _loader, _recorded, _tied  # noqa: E402


def _evaluation(program, model) -> dict:
    logits, tokens = evaluate(program, model, program.eval_batch())
    return {"logits": logits.reshape(-1).tolist(), "tokens": None if tokens is None else tokens.tolist()}


def _built(program) -> tuple:
    """``program.build()`` and what it printed (peft's ``print_trainable_parameters``)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        state = program.build()
    return state, printed.getvalue()


def _trainable(model) -> list:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def _adam_steps(model, optimizer) -> list:
    """Each parameter's count of AdamW updates (None: never updated): a frozen step leaves no count."""
    return [float(optimizer.state[p]["step"]) if p in optimizer.state else None for p in model.parameters()]


def _merged_evaluation(program, model) -> dict | None:
    """peft's ``merge_and_unload()`` after training (the adapters folded into the base weights), evaluated."""
    return _evaluation(program, model.merge_and_unload()) if program.peft else None


def _saved_name(name: str) -> str:
    """peft's name in the adapter file for a trainable parameter: without the adapter's name (``default``)."""
    return name.replace(".modules_to_save.default", "").replace(".default", "")


def _round_trip(program, model) -> dict:
    """``save_pretrained`` then loading as a script would: the adapter alone onto a freshly loaded base
    (``PeftModel.from_pretrained``), or the whole model with its class's ``from_pretrained``."""
    from safetensors.torch import load_file
    with tempfile.TemporaryDirectory() as path:
        model.save_pretrained(path)
        if not program.peft:
            loaded = type(model).from_pretrained(path, dtype=F64, **dict(program.load_kwargs))
            return {"reloaded_params": _flat(loaded.parameters()), "reloaded_tied": _tied(loaded),
                    "reloaded_evaluation": _evaluation(program, loaded)}
        from peft import PeftModel
        saved = load_file(os.path.join(path, "adapter_model.safetensors"))
        loaded = PeftModel.from_pretrained(load_base(), path)
    trained = {_saved_name(n): p for n, p in model.named_parameters() if p.requires_grad}
    exact = sorted(saved) == sorted(trained) and all(
        saved[n].dtype == F64 and torch.equal(saved[n], trained[n].detach()) for n in saved)
    return {"adapter_keys": sorted(saved), "adapter_exact": exact, "reloaded_params": _flat(loaded.parameters()),
            "reloaded_evaluation": _evaluation(program, loaded)}


def on_strategy(program, strategy) -> dict:
    """The port on ``strategy``'s replicas: each replica's logged numbers, replica 0's weights (every
    parameter, frozen ones too), the evaluation and the round trip."""
    with strategy.scope():
        state, printed = _built(program)
    model = state[0]
    logged = []
    for step, batch in enumerate(strategy.experimental_distribute_dataset(_loader(program))):
        if program.before_step is not None:
            program.before_step(state, step)
        out = strategy.run(program.step or train_step, args=(state, batch))
        logged.append({k: [float(v) for v in strategy.experimental_local_results(t)] for k, t in out.items()})
    copies = [strategy.experimental_local_results(p) for p in model.parameters()]
    spread = max(float((c[r] - c[0]).detach().abs().max()) for c in copies for r in range(len(c)))
    result = {"logged": logged, "replica_spread": spread, "tied": _tied(model), "printed": printed,
              "trainable": _trainable(model), "adam_steps": _adam_steps(model, state[1]),
              "params": _flat(c[0] for c in copies), "evaluation": _evaluation(program, model),
              **_round_trip(program, model)}
    return {**result, "merged_evaluation": _merged_evaluation(program, model)}


def main_multidev(out_dir: str) -> None:
    import multidev as md
    strategy = md.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    results = {p.name: _recorded(on_strategy, p, strategy) for p in HF_PROGRAMS2}
    with open(os.path.join(out_dir, "hf2_multidev.json"), "w") as f:
        json.dump(results, f)


def main_workers(out_dir: str) -> None:
    """Under ``multidev launch --workers 2``: MultiWorkerMirroredStrategy, one replica per worker."""
    import multidev as md
    strategy = md.distribute.MultiWorkerMirroredStrategy()
    results = {p.name: _recorded(on_strategy, p, strategy) for p in HF_PROGRAMS2}
    with open(os.path.join(out_dir, f"hf2_worker{strategy.extended.worker_index}.json"), "w") as f:
        json.dump(results, f)


def _per_rank(value: torch.Tensor) -> list:
    gathered = [torch.zeros_like(value) for _ in range(torch.distributed.get_world_size())]
    torch.distributed.all_gather(gathered, value)
    return [float(v) for v in gathered]


def ddp(program, rank: int, world: int) -> dict:
    """HF's loop on this rank's half of each global batch, the model wrapped in DDP when built (before
    ``before_step`` freezes anything: DDP reduces only the parameters that required grad then)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    (model, optimizer, lr_scheduler), printed = _built(program)
    state = (DDP(model, find_unused_parameters=program.find_unused_parameters), optimizer, lr_scheduler)
    logged = []
    for step, batch in enumerate(_loader(program)):
        if program.before_step is not None:
            program.before_step((model, optimizer, lr_scheduler), step)
        mine = {k: torch.tensor_split(v, world)[rank] for k, v in batch.items()}
        logged.append({k: _per_rank(v) for k, v in (program.step or train_step)(state, mine).items()})
    return {"logged": logged, "params": _flat(model.parameters()), "evaluation": _evaluation(program, model),
            "tied": _tied(model), "printed": printed, "trainable": _trainable(model),
            "adam_steps": _adam_steps(model, optimizer), "merged_evaluation": _merged_evaluation(program, model)}


def main_ddp(out_dir: str) -> None:
    hf_run.main_ddp(out_dir, HF_PROGRAMS2, ddp, "hf2_ddp.json", pretrained_llama)


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    ("TF_CONFIG" in os.environ and main_workers or "RANK" in os.environ and main_ddp or main_multidev)(sys.argv[1])
