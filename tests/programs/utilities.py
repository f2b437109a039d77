"""PyTorch's training utilities called in the step, as ``Program``s (same runners as ``idioms.py``):
``torch.amp.GradScaler`` with bfloat16 autocast (an inf in the last replica's slice of one batch:
every replica, every worker and every DDP rank must skip that step and back the scale off), and
``AveragedModel`` (EMA and SWA) with ``SWALR``. ``observe`` records the scale, the averaged counts
and the learning rate after every step; the tests compare them exactly.
This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim import swa_utils

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen


def _regressor(dtype: torch.dtype) -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1)).to(dtype)


# --- GradScaler + bfloat16 autocast, unscale_ and clipping (the AMP recipe of torch's docs) ------------
POISONED_STEP = 2


def _scaler_build(make_opt):
    def build():
        torch.manual_seed(14)
        model = _regressor(torch.float32)   # float32 weights: autocast runs the matmuls in bfloat16
        return {"model": model, "opt": make_opt(model.parameters()),
                "scaler": torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)}
    return build


def _scaler_batches():
    g = _gen(62)
    out = []
    for i in range(5):
        x = torch.randn(GLOBAL_BATCH, 6, generator=g)
        y = torch.randn(GLOBAL_BATCH, 1, generator=g)
        if i == POISONED_STEP:
            y[GLOBAL_BATCH - 1, 0] = math.inf   # the last replica's slice (the last worker's) only
        out.append((x, y))
    return out


def _scaler_step(state, batch, carry):
    x, y = batch
    model, opt, scaler = state["model"], state["opt"], state["scaler"]
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    return loss.detach().float(), carry


def _scaler_observe(state) -> list:
    scaler = state["scaler"]
    return [scaler.get_scale(), scaler._get_growth_tracker()]


# --- AveragedModel: an EMA (multi_avg_fn) and an SWA average (the default), SWALR ---------------------
def _averaged_build():
    torch.manual_seed(15)
    model = _regressor(F64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"model": model, "opt": opt,
            "ema": swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.8)),
            "swa": swa_utils.AveragedModel(model), "swalr": swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=2)}


def _batches_of(seed: int, steps: int):
    def batches():
        g = _gen(seed)
        return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randn(GLOBAL_BATCH, 1, generator=g, dtype=F64))
                for _ in range(steps)]
    return batches


def _averaged_step(state, batch, carry):
    x, y = batch
    model, opt = state["model"], state["opt"]
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    state["ema"].update_parameters(model)
    state["swa"].update_parameters(model)
    state["swalr"].step()
    return loss.detach(), carry


def _averaged_observe(state) -> list:
    return [float(state["ema"].n_averaged), float(state["swa"].n_averaged), state["opt"].param_groups[0]["lr"]]


# --- ReduceLROnPlateau.step(loss) in the step: the metric of the whole global batch ----------------------
def _plateau_build():
    torch.manual_seed(16)
    model = _regressor(F64)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0, threshold=0.0)
    return {"model": model, "opt": opt, "plateau": plateau}


def _plateau_step(state, batch, carry):
    x, y = batch
    opt = state["opt"]
    opt.zero_grad()
    loss = F.mse_loss(state["model"](x), y)
    loss.backward()
    opt.step()
    state["plateau"].step(loss.detach())   # each DDP rank: its own half's loss
    return loss.detach(), carry


def _plateau_observe(state) -> list:
    return [state["opt"].param_groups[0]["lr"], float(state["plateau"].best)]


# --- lazy modules: a dry run before the optimizer (torch's and DDP's advice), or none ---------------------
def _lazy_model():
    torch.manual_seed(17)
    return nn.Sequential(nn.LazyLinear(8, dtype=F64), nn.Tanh(), nn.Linear(8, 3, dtype=F64))


def _lazy_dry_run_build():
    model = _lazy_model()
    model(torch.zeros(1, 6, dtype=F64))   # the dry run: shapes and initial values, before the optimizer
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1)}


def _lazy_step(state, batch, carry):
    """The first step only runs the model forward (it materializes); the optimizer comes after it."""
    x, y = batch
    if "opt" not in state:
        return F.cross_entropy(state["model"](x), y).detach(), carry
    opt = state["opt"]
    opt.zero_grad()
    loss = F.cross_entropy(state["model"](x), y)
    loss.backward()
    opt.step()
    return loss.detach(), carry


def _optimizer_after_first_step(state, i):
    if i == 0:
        module = getattr(state["model"], "module", state["model"])
        state["opt"] = torch.optim.SGD(module.parameters(), lr=0.1)


def _class_batches():
    g = _gen(65)
    return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(3)]


LAZY_ON_WORKERS = r"first forward pass inside strategy.run, on several workers .*\(model\(sample_batch\)\)"
LAZY_DDP = "Modules with uninitialized parameters can't be used with `DistributedDataParallel`"

# Each DDP rank's scheduler sees its own half's loss: the ranks' learning rates part ways.
PLATEAU_DDP = "ReduceLROnPlateau on a DDP rank sees that rank's loss, not the global batch's: the ranks drift"

UTILITIES = [
    # bfloat16 products over a replica's slice round differently from the whole batch's.
    Program("grad_scaler_bf16", _scaler_build(lambda ps: torch.optim.SGD(ps, lr=0.2, momentum=0.9)), _scaler_batches,
            _scaler_step, dtype=torch.float32, tolerance=5e-3, observe=_scaler_observe),
    # fused Adam takes the scale and the inf check into its own kernel (``_step_supports_amp_scaling``)
    Program("grad_scaler_fused_adam", _scaler_build(lambda ps: torch.optim.Adam(ps, lr=0.05, fused=True)),
            _scaler_batches, _scaler_step, dtype=torch.float32, tolerance=5e-3, observe=_scaler_observe),
    Program("averaged_model", _averaged_build, _batches_of(63, 4), _averaged_step, averaged=("ema", "swa"),
            observe=_averaged_observe),
    Program("reduce_lr_on_plateau", _plateau_build, _batches_of(64, 6), _plateau_step, observe=_plateau_observe,
            ddp_differs=PLATEAU_DDP),
    Program("lazy_dry_run", _lazy_dry_run_build, _class_batches, _lazy_step),
    Program("lazy_first_forward_in_step", lambda: {"model": _lazy_model()}, _class_batches, _lazy_step,
            after_step=_optimizer_after_first_step, workers_refused=LAZY_ON_WORKERS, ddp_refused=LAZY_DDP),
]
