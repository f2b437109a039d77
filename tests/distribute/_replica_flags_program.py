"""Run by test_replica_flags.py in a fresh interpreter (2 logical CPUs): a flag (``bool``) a module writes in
its ``train()`` / ``eval()`` inside ``strategy.run`` is the writing replica's own, as each DDP rank's module
keeps its own flag; other flags stay one for every replica.
loralib's ``Linear`` merges its low-rank update into the frozen weight in ``train(False)`` and unmerges it in
``train(True)``, guarded by ``self.merged``. Replica 1 waits (an event, first run only) until replica 0 has
switched to eval mode, so with one shared flag replica 1 saw ``merged`` already True and skipped its own merge. Prints
one JSON object: case -> result."""

from __future__ import annotations

import json
import math
import threading

import torch
from torch import nn
from torch.nn import functional as F

import multidev as md

F64 = torch.float64
torch.set_default_dtype(F64)
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
g = torch.Generator().manual_seed(3)
X, Y = torch.randn(4, 8, 6, generator=g), torch.randint(0, 3, (4, 8), generator=g)
RESULTS: dict = {}


def case(fn):
    try:
        RESULTS[fn.__name__] = fn()
    except Exception as e:   # noqa: BLE001 - recorded and checked by the test
        RESULTS[fn.__name__] = {"error": f"{type(e).__name__}: {e}"[:600]}
    return fn


class Ordered:
    """In the first run only: replica 1 goes on after replica 0 passed ``done()`` (so the order is fixed)."""

    def __init__(self):
        self.event, self.armed = threading.Event(), True

    def wait_for_replica_0(self):
        ctx = md.distribute.get_replica_context()
        if self.armed and ctx is not None and ctx.replica_id_in_sync_group == 1:
            assert self.event.wait(30), "replica 0 never switched"

    def done(self):
        ctx = md.distribute.get_replica_context()
        if ctx is not None and ctx.replica_id_in_sync_group == 0:
            self.event.set()


class LoraLinear(nn.Linear):
    """loralib's ``Linear`` (microsoft/LoRA), merge_weights=True."""

    def __init__(self, i, o, r=2, lora_alpha=4):
        nn.Linear.__init__(self, i, o)
        self.r, self.merge_weights, self.merged = r, True, False
        self.lora_A = nn.Parameter(self.weight.new_zeros((r, i)))
        self.lora_B = nn.Parameter(self.weight.new_zeros((o, r)))
        self.scaling = lora_alpha / r
        self.weight.requires_grad = False
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.2)

    def train(self, mode=True):
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
                self.merged = True
        return self

    def forward(self, x):
        result = F.linear(x, self.weight, bias=self.bias)
        if self.r > 0 and not self.merged:
            result = result + (x @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
        return result


def _lora_model():
    torch.manual_seed(4)
    model = nn.Sequential(LoraLinear(6, 8), nn.ReLU(), LoraLinear(8, 3))
    for n, p in model.named_parameters():   # loralib.mark_only_lora_as_trainable
        p.requires_grad = "lora_" in n
    return model


def _train(model, opt, x, y, order=None):
    """The step: train, update, then an evaluation pass in eval mode (merged weights), as the loop's own."""
    model.train()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    if order is not None:   # after the step's collectives: replica 0 can go on alone
        order.wait_for_replica_0()
    model.eval()
    if order is not None:
        order.done()
    with torch.no_grad():
        return F.cross_entropy(model(x), y)


@case
def lora_merged_in_eval_inside_the_step():
    reference = _lora_model()
    ref_opt = torch.optim.Adam([p for p in reference.parameters() if p.requires_grad], lr=0.05)
    ref_losses = [float(_train(reference, ref_opt, X[i], Y[i])) for i in range(len(X))]
    with strategy.scope():
        model = _lora_model()
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    order = Ordered()
    dataset = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X.reshape(-1, 6), Y.reshape(-1)), batch_size=8)
    losses = []
    for x, y in strategy.experimental_distribute_dataset(dataset):
        losses.append(float(strategy.reduce("MEAN", strategy.run(_train, args=(model, opt, x, y, order)), axis=None)))
        order.armed = False
    local = strategy.experimental_local_results
    diff = max(float((local(p)[r] - q).abs().max()) for p, q in zip(model.parameters(), reference.parameters())
               for r in range(2))
    merged = [bool(m.merged) for m in model.modules() if isinstance(m, LoraLinear)]
    model.train()   # outside the run: every replica's layers unmerge
    unmerged = max(float((local(p)[r] - q).abs().max()) for p, q in zip(model.parameters(), reference.train().parameters())
                   for r in range(2))
    return {"diff": diff, "loss_diff": max(abs(a - b) for a, b in zip(losses, ref_losses)), "merged": merged,
            "unmerged_diff": unmerged}


class Guarded(nn.Module):
    """A one-time guard in ``forward`` (transformers' ``_output_capturing_hooks_installed``): the first call
    installs a forward hook on the module object, which every replica shares."""

    def __init__(self):
        super().__init__()
        self.linear, self.hooks_installed, self.captured = nn.Linear(2, 2), False, 0

    def forward(self, x):
        if not self.hooks_installed:
            self.linear.register_forward_hook(lambda *_: setattr(self, "captured", self.captured + 1))
            self.hooks_installed = True
        return self.linear(x)


@case
def a_flag_written_in_forward_stays_shared():
    """Replica 1 runs after replica 0 set the guard: it sees it set and installs nothing (one hook, as each
    rank's one); a flag written outside train() / eval() is one for every replica."""
    with strategy.scope():
        model = Guarded()
    order = Ordered()

    def step(x):
        order.wait_for_replica_0()
        out = model(x)
        order.done()
        return out.sum()

    strategy.run(step, args=(torch.ones(1, 2),))
    return {"hooks": len(model.linear._forward_hooks), "flag": model.hooks_installed}


@case
def a_reset_between_runs_reaches_every_replica():
    """Replica 1 alone counts ``skipped = 5``; the script resets it between runs to the value replica 0 holds
    (every rank's script does it): every replica reads 0."""
    with strategy.scope():
        layer = nn.Linear(2, 2)
    layer.skipped = 0

    def step():
        if md.distribute.get_replica_context().replica_id_in_sync_group == 1:
            layer.skipped = 5
        return torch.tensor(float(layer.skipped))

    local = strategy.experimental_local_results
    before = [float(t) for t in local(strategy.run(step))]
    layer.skipped = 0
    after = [float(t) for t in local(strategy.run(lambda: torch.tensor(float(layer.skipped))))]
    return {"before": before, "after": after}


print(json.dumps(RESULTS))
