"""PyTorch's "Saving and loading a general checkpoint" recipe, ported with a strategy, run in phases.

``python resume_recipe.py MODE START STOP FORMAT OUT`` trains steps ``START..STOP`` of one fixed
sequence of global batches under ``MODE`` (``mirrored``: every local device; ``one``: OneDeviceStrategy;
``none``: no strategy; ``mwms``: MultiWorkerMirroredStrategy under ``multidev launch``). With
``START > 0`` it resumes from the files the previous phase left in the current directory: ``FORMAT``
``torch`` reads the recipe's ``torch.save`` dict (``torch.load(PATH, weights_only=True)``, a relative
PATH), ``md`` reads the ``md.train.Checkpoint``. Each phase writes both at its end (the torch file on
worker 0 only, as DDP programs do) and the chief writes ``OUT``: losses, weights, the AveragedModel's,
the scheduler's LR, the GradScaler's scale and Adam's step count.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F

import multidev as md

PATH = "recipe.pt"


def build(strategy, dropout: float):
    torch.manual_seed(1)
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(4, 16, dtype=torch.float64), torch.nn.ReLU(),
                                    torch.nn.Dropout(dropout), torch.nn.Linear(16, 1, dtype=torch.float64))
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
        swa = torch.optim.swa_utils.AveragedModel(model)
    return model, optimizer, scheduler, scaler, swa


def batches(strategy):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, dtype=torch.float64, generator=gen)
    dataset = md.data.Dataset.from_tensor_slices((x, x.sum(1, keepdim=True) ** 2)).batch(8)
    return iter(strategy.experimental_distribute_dataset(dataset))


def strategy_for(mode: str):
    return {"mirrored": md.distribute.MirroredStrategy, "mwms": md.distribute.MultiWorkerMirroredStrategy,
            "one": lambda: md.distribute.OneDeviceStrategy("/cpu:0"), "none": md.distribute.get_strategy}[mode]()


def main(mode: str, start: int, stop: int, fmt: str, out: str, dropout: float = 0.0, restore_rng: bool = True) -> dict:
    strategy = strategy_for(mode)
    chief = mode != "mwms" or strategy.extended.worker_index == 0
    model, optimizer, scheduler, scaler, swa = build(strategy, dropout)
    iterator = batches(strategy)
    ckpt = md.train.Checkpoint(model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler, swa=swa,
                               iterator=iterator, rng=torch.default_generator)
    if start and fmt == "torch":
        checkpoint = torch.load(PATH, weights_only=True)
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
        scaler.load_state_dict(checkpoint["scaler_state_dict"])
        swa.load_state_dict(checkpoint["swa_state_dict"])
        if restore_rng:
            torch.set_rng_state(checkpoint["rng_state"])
        for _ in range(checkpoint["epoch"]):
            next(iterator)
    elif start:
        ckpt.restore(md.train.latest_checkpoint("md_ckpts")).assert_consumed()

    def step(x, y):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    losses, loss = [], None
    for _ in range(start, stop):
        loss = strategy.reduce("mean", strategy.run(step, args=next(iterator)), axis=None)
        losses.append(float(loss))
        scheduler.step()
        swa.update_parameters(model)
    ckpt.save("md_ckpts/ckpt")                  # every worker saves; the chief's files are kept
    if chief:
        torch.save({"epoch": stop, "model_state_dict": model.state_dict(), "optimizer_state_dict": optimizer.state_dict(),
                    "loss": loss, "scheduler_state_dict": scheduler.state_dict(), "scaler_state_dict": scaler.state_dict(),
                    "swa_state_dict": swa.state_dict(), "rng_state": torch.get_rng_state()}, PATH)
    result = {"losses": losses, "weights": flat(model.state_dict()), "swa": flat(swa.module.state_dict()),
              "lr": scheduler.get_last_lr(), "scale": scaler.get_scale(),
              "adam_steps": sorted({float(s["step"]) for s in optimizer.state.values()})}
    if chief:
        with open(out, "w") as f:
            json.dump(result, f)
    return result


def flat(state_dict) -> list:
    return [float(v) for t in state_dict.values() if t.is_floating_point() for v in t.detach().reshape(-1)]


if __name__ == "__main__":
    mode, start, stop, fmt, out = sys.argv[1:6]
    main(mode, int(start), int(stop), fmt, out, float(os.environ.get("RECIPE_DROPOUT", "0")))
