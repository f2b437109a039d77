"""The idioms PyTorch tutorials and training scripts write around ``pyexamples.py``'s programs, as
``programs.py``'s ``Program``s (same runners: one device, DDP on 2 Gloo processes, MirroredStrategy,
MultiWorkerMirroredStrategy), float64:

* "Writing Distributed Applications with PyTorch": ``average_gradients(model)`` by hand with
  ``dist.all_reduce(param.grad.data)``, which DDP averages a second time to the same numbers and
  multidev refuses naming its own reduction (never a silent double average);
* a module counting its training batches in a ``register_buffer`` in ``forward`` (``self.steps += 1``)
  with ``model.train()`` / ``model.eval()`` switching inside the loop;
* random state in the step: activation checkpointing over dropout (its recomputation in backward must
  replay each replica's masks) and ``torch.manual_seed(seed + step)`` in the step;
* Hugging Face style accumulation over steps: one micro-batch per run, ``model.no_sync()`` under DDP
  on all but the last, ``.grad`` accumulated across runs, then clipping, AdamW, ``OneCycleLR`` and an
  ``AveragedModel`` EMA at each update;
* ``ReduceLROnPlateau.step(val_loss)`` on a validation loss computed between epochs.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
import torch.utils.checkpoint
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from idioms2 import plain_step as _plain_step
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.idioms2 import plain_step as _plain_step
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen

# --- "Writing Distributed Applications with PyTorch": average_gradients by hand ------------------------------
def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def _tutorial_build():
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3), nn.LogSoftmax(dim=1)).double()
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)}


def _class_batches(seed):
    def batches():
        g = _gen(seed)
        return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
                for _ in range(3)]
    return batches


def _tutorial_step(state, batch, carry):
    data, target = batch
    state["optimizer"].zero_grad()
    loss = F.nll_loss(state["model"](data), target)
    loss.backward()
    average_gradients(state["model"])
    state["optimizer"].step()
    return loss.detach(), carry


# --- a buffer counting training batches in forward, model.eval() / model.train() inside the loop ----------
class CountingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8), nn.Linear(8, 3)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            self.steps += 1
        scale = 1.0 / (1.0 + self.steps.double())   # a schedule read from the counter
        return self.fc2(torch.tanh(self.fc1(x)) * scale)


def _counting_build():
    torch.manual_seed(12)
    model = CountingNet().double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.5), "log": []}


def _counting_step(state, batch, carry):
    x, y = batch
    model = state["model"]
    model.eval()
    with torch.no_grad():
        before = F.cross_entropy(model(x), y)   # a look at the batch before training on it
    model.train()
    state["opt"].zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    state["opt"].step()
    return (loss + 0 * before).detach(), carry


def _counting_observe(state) -> list:
    model = getattr(state["model"], "module", state["model"])
    return [int(model.steps), str(model.steps.dtype), model.training]


TORCH_DISTRIBUTED = (r"^ValueError: torch.distributed.get_world_size inside strategy.run: .*get_replica_context\(\)"
                     r".all_reduce\('sum', value\).*strategy.reduce\('mean', value, axis=None\)")

PYEXAMPLE_IDIOMS = [
    Program("average_gradients_by_hand", _tutorial_build, _class_batches(93), _tutorial_step,
            refused=TORCH_DISTRIBUTED, workers_refused=TORCH_DISTRIBUTED),
    Program("buffer_counter_train_eval", _counting_build, _class_batches(92), _counting_step,
            observe=_counting_observe),
]


# --- random state inside the step: activation checkpointing over dropout, a seed set in the step ------------
class CheckpointedDropoutNet(nn.Module):
    """Hugging Face's gradient checkpointing over blocks with dropout (0.1 in their configs): the
    recomputation in backward restores the forward's random state (``preserve_rng_state=True``)."""

    def __init__(self, reentrant: bool):
        super().__init__()
        self.embed = nn.Linear(6, 6)   # the blocks' input requires grad (reentrant checkpointing needs it)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Dropout(0.3)) for _ in range(2))
        self.head = nn.Linear(6, 3)
        self.reentrant = reentrant

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


def _checkpoint_dropout_build(reentrant: bool):
    def build():
        torch.manual_seed(13)
        model = CheckpointedDropoutNet(reentrant).double()
        return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.5)}
    return build


def _seeded_step(state, batch, carry):
    """A step that seeds torch itself (``torch.manual_seed(seed + step)``) before its dropout draws."""
    (i,) = carry
    torch.manual_seed(1000 + int(i))
    loss, _ = _plain_step(state, batch, carry)
    return loss, (i + 1,)


def _dropout_build():
    torch.manual_seed(14)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)).double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.5)}


PYEXAMPLE_IDIOMS += [
    *(Program(f"checkpoint_dropout_{kind}", _checkpoint_dropout_build(kind == "reentrant"), _class_batches(91),
              _plain_step, compare_one_device=False) for kind in ("reentrant", "non_reentrant")),
    Program("manual_seed_in_step", _dropout_build, _class_batches(90), _seeded_step, compare_one_device=False,
            initial_carry=lambda bsz: (torch.zeros((), dtype=F64),)),
]


# --- Hugging Face style accumulation over steps: no_sync on all but the last micro-batch, one update ----
ACCUMULATION_STEPS = 2


def _accumulation_build():
    torch.manual_seed(15)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 3)).double()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    return {"model": model, "optimizer": optimizer,
            "scheduler": torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=3),
            "ema": torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))}


def _accumulation_step(state, batch, carry):
    """One micro-batch per ``strategy.run`` (a loader's batch each), the update every 2nd: DDP skips its
    all-reduce under ``no_sync()`` (multidev has none to skip: the port drops it), ``.grad`` accumulates
    across the runs; clipping, the optimizer, the schedule and an EMA of the weights at each update."""
    (i,) = carry
    x, y = batch
    model = state["model"]
    update = (int(i) + 1) % ACCUMULATION_STEPS == 0
    no_sync = model.no_sync() if hasattr(model, "no_sync") and not update else contextlib.nullcontext()
    with no_sync:
        loss = F.cross_entropy(model(x), y) / ACCUMULATION_STEPS
        loss.backward()
    if update:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        state["optimizer"].step()
        state["scheduler"].step()
        state["optimizer"].zero_grad()
        state["ema"].update_parameters(model)
    return loss.detach(), (i + 1,)


def _six_batches():
    g = _gen(89)
    return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(6)]


PYEXAMPLE_IDIOMS += [
    # DDP sums the micro-batches' local gradients before its one all-reduce, multidev averages each
    # (no_sync has nothing to skip): the same sums in another order, a rounding apart
    Program("accumulation_across_steps_no_sync", _accumulation_build, _six_batches, _accumulation_step,
            initial_carry=lambda bsz: (torch.zeros((), dtype=F64),), averaged=("ema",), compare_one_device=False,
            observe=lambda state: [state["optimizer"].param_groups[0]["lr"], float(state["ema"].n_averaged)]),
]


# --- ReduceLROnPlateau on a validation loss computed between epochs (cross-replica) --------------------------
def _plateau_build():
    torch.manual_seed(16)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return {"model": model, "opt": optimizer,
            "plateau": torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0, threshold=0.5)}


def _plateau_epoch_end(state, i):
    """Every step ends an epoch here: the validation loss (model.eval(), no_grad) steps the schedule."""
    g = _gen(88)
    x, y = torch.randn(10, 6, generator=g, dtype=F64), torch.randint(0, 3, (10,), generator=g)
    model = state["model"]
    model.eval()
    with torch.no_grad():
        val_loss = F.cross_entropy(model(x), y).item()
    model.train()
    state["plateau"].step(val_loss)


PYEXAMPLE_IDIOMS += [
    Program("plateau_on_validation_loss", _plateau_build, _class_batches(87), _plain_step, after_step=_plateau_epoch_end,
            observe=lambda state: [state["opt"].param_groups[0]["lr"], state["plateau"].best]),
]
