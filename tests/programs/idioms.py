"""Idioms PyTorch users write around the public examples, as ``programs.py``'s ``Program``s (same
three runners), float64, as their authors write them: gradient accumulation (``no_sync``), clipping,
``zero_grad(set_to_none=False)``, several optimizers, ``add_param_group``, closures and LBFGS,
``torch.autograd.grad`` with a manual update, two backward passes, optimizer options, schedulers,
sparse embeddings, ``state_dict`` reloads. ``after_step(state, i)`` runs between steps in
cross-replica context (an epoch's end); a step that needs its index carries it as a tensor.
This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from gpt import GPT_PROGRAMS
    from idioms2 import IDIOMS2, plain_step as _plain_step
    from programs import F64, GLOBAL_BATCH, PROGRAMS, Program, _gen
    from pyexamples import PYEXAMPLES
    from torchvision_recipe import TORCHVISION_PROGRAMS
    from utilities import UTILITIES
    from vision_examples import VISION_EXAMPLES
except ImportError:
    from tests.programs.gpt import GPT_PROGRAMS
    from tests.programs.idioms2 import IDIOMS2, plain_step as _plain_step
    from tests.programs.programs import F64, GLOBAL_BATCH, PROGRAMS, Program, _gen
    from tests.programs.pyexamples import PYEXAMPLES
    from tests.programs.torchvision_recipe import TORCHVISION_PROGRAMS
    from tests.programs.utilities import UTILITIES
    from tests.programs.vision_examples import VISION_EXAMPLES

sched = torch.optim.lr_scheduler


class Mlp(nn.Module):
    def __init__(self, width=6, hidden=8, classes=3):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _batches(seed=60, steps=3):
    def batches():
        g = _gen(seed)
        return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
                for _ in range(steps)]
    return batches


def _with(make_opt, seed=7, schedule=None):
    """``build`` of an Mlp and ``make_opt(model)`` (and ``schedule(opt)`` as ``state['sched']``)."""
    def build():
        torch.manual_seed(seed)
        model = Mlp().double()
        state = {"model": model, "opt": make_opt(model)}
        if schedule is not None:
            state["sched"] = schedule(state["opt"])
        return state
    return build


# --- gradient accumulation: (loss / k).backward() per micro-batch, no_sync under DDP ------------------------
ACCUMULATE = 2


def _accumulate_step(state, batch, carry):
    model, opt = state["model"], state["opt"]
    micro = list(zip(*(torch.tensor_split(t, ACCUMULATE) for t in batch)))
    total = 0.0
    for i, (x, y) in enumerate(micro):
        last = i == len(micro) - 1
        sync = contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            loss = F.cross_entropy(model(x), y) / ACCUMULATE
            loss.backward()
        total = total + loss.detach()
    opt.step()
    opt.zero_grad()
    return total, carry


def _accumulate_keep_step(state, batch, carry):
    """Accumulation into ``.grad`` zeroed in place (``zero_grad(set_to_none=False)``) after the step."""
    total, carry = _accumulate_step(state, batch, carry)
    state["opt"].zero_grad(set_to_none=False)
    return total, carry


def _nanogpt_step(state, batch, carry):
    """nanoGPT's train loop: the learning rate set by hand in every group, micro-steps that set DDP's
    ``require_backward_grad_sync`` (a plain attribute elsewhere), clipping, ``zero_grad(set_to_none=True)``."""
    (i,) = carry
    model, opt = state["model"], state["opt"]
    lr = 0.1 * min(1.0, (float(i) + 1) / 2)   # get_lr(iter_num): linear warmup
    for param_group in opt.param_groups:
        param_group["lr"] = lr
    micro = list(zip(*(torch.tensor_split(t, ACCUMULATE) for t in batch)))
    total = 0.0
    for micro_step, (x, y) in enumerate(micro):
        model.require_backward_grad_sync = micro_step == ACCUMULATE - 1
        loss = F.cross_entropy(model(x), y) / ACCUMULATE
        loss.backward()
        total = total + loss.detach()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return total, (i + 1,)


# --- clipping -------------------------------------------------------------------------------------------
def _clip_step(clip):
    def step(state, batch, carry):
        x, y = batch
        model, opt = state["model"], state["opt"]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        clip(model.parameters())
        opt.step()
        return loss.detach(), carry
    return step


# --- zero_grad(set_to_none=False): .grad zeroed in place, accumulated into -------------------------------
def _keep_grad_step(state, batch, carry):
    x, y = batch
    state["opt"].zero_grad(set_to_none=False)
    loss = F.cross_entropy(state["model"](x), y)
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


# --- two optimizers over disjoint parameters; a group added mid-training --------------------------------
def _two_optimizers_build():
    torch.manual_seed(8)
    model = Mlp().double()
    return {"model": model, "opt": torch.optim.SGD(model.fc1.parameters(), lr=0.2, momentum=0.9),
            "opt2": torch.optim.Adam(model.fc2.parameters(), lr=0.05)}


def _two_optimizers_step(state, batch, carry):
    x, y = batch
    state["opt"].zero_grad()
    state["opt2"].zero_grad()
    loss = F.cross_entropy(state["model"](x), y)
    loss.backward()
    state["opt"].step()
    state["opt2"].step()
    return loss.detach(), carry


def _add_group_build():
    torch.manual_seed(9)
    model = Mlp().double()
    return {"model": model, "opt": torch.optim.Adam(model.fc2.parameters(), lr=0.05)}


def _add_group_after(state, i):
    if i == 0:   # "unfreeze" the first layer after the first step
        module = getattr(state["model"], "module", state["model"])
        state["opt"].add_param_group({"params": module.fc1.parameters(), "lr": 0.02})


# --- torch.autograd.grad and a manual SGD update, no torch.optim ----------------------------------------
def _manual_build():
    torch.manual_seed(10)
    return {"model": Mlp().double(), "lr": 0.3}


def _manual_step(update):
    def step(state, batch, carry):
        x, y = batch
        model = state["model"]
        params = [p for p in model.parameters() if p.requires_grad]
        loss = F.cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                update(p, g, state["lr"])
        return loss.detach(), carry
    return step


def _isub(p, g, lr):
    p -= lr * g




def _grad_update_step(state, batch, carry):
    """The same manual update from ``p.grad`` after ``loss.backward()`` (reduced, as under DDP)."""
    x, y = batch
    model = state["model"]
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= state["lr"] * p.grad
    return loss.detach(), carry


# --- opt.step(closure): Adam evaluates it once, LBFGS on every iteration (each calls backward) -------------
def _closure_step(state, batch, carry):
    x, y = batch
    model, opt = state["model"], state["opt"]

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    return opt.step(closure).detach(), carry


# --- retain_graph: two losses of one forward, two backward passes, one step ------------------------------
def _retain_step(state, batch, carry):
    x, y = batch
    model, opt = state["model"], state["opt"]
    opt.zero_grad()
    out = model(x)
    ce = F.cross_entropy(out, y)
    penalty = 0.1 * out.pow(2).mean()
    ce.backward(retain_graph=True)
    penalty.backward()
    opt.step()
    return (ce + penalty).detach(), carry


# --- schedulers -----------------------------------------------------------------------------------------
def _per_batch_step(state, batch, carry):
    loss, carry = _plain_step(state, batch, carry)
    state["sched"].step()
    return loss, carry


ITERS = 3   # batches per "epoch" of the fractional-epoch schedule


def _warm_restarts_step(state, batch, carry):
    """torch's documented CosineAnnealingWarmRestarts loop: ``scheduler.step(epoch + i / iters)``."""
    (i,) = carry
    loss, _ = _plain_step(state, batch, carry)
    epoch, k = divmod(int(i), ITERS)
    state["sched"].step(epoch + k / ITERS)
    return loss, (i + 1,)


def _sequential(opt):
    warm = sched.LinearLR(opt, start_factor=0.5, total_iters=1)
    return sched.SequentialLR(opt, [warm, sched.ExponentialLR(opt, gamma=0.8)], milestones=[1])


def _chained(opt):
    return sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.5, total_iters=2), sched.ExponentialLR(opt, gamma=0.9)])


# --- sparse embedding + SparseAdam ----------------------------------------------------------------------
class SparseBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 5, sparse=True)
        self.fc = nn.Linear(5, 3)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(dim=1))


def _sparse_build():
    torch.manual_seed(11)
    model = SparseBag().double()
    return {"model": model, "opt": torch.optim.SparseAdam(list(model.emb.parameters()), lr=0.05),
            "opt2": torch.optim.Adam(model.fc.parameters(), lr=0.05)}


def _sparse_batches():
    g = _gen(61)
    return [(torch.randint(0, 12, (GLOBAL_BATCH, 3), generator=g), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(3)]



# --- the model's state_dict saved after step 1 and loaded back after step 2 ------------------------------
def _model_reload_after(state, i):
    module = getattr(state["model"], "module", state["model"])
    if i == 0:
        state["saved"] = copy.deepcopy(module.state_dict())
    elif i == 1:
        module.load_state_dict(state["saved"])


# --- an EMA of the weights, updated by hand in the step -------------------------------------------------
def _ema_build():
    state = _with(_opt(torch.optim.Adam, lr=0.05), seed=12)()
    state["ema"] = copy.deepcopy(state["model"])
    return state


def _ema_step(state, batch, carry):
    loss, carry = _plain_step(state, batch, carry)
    with torch.no_grad():
        for ema_p, p in zip(state["ema"].parameters(), state["model"].parameters()):
            ema_p.mul_(0.9).add_(p, alpha=0.1)
    return loss, carry


# --- an optimizer's state_dict saved after step 2, loaded into a fresh one ------------------------------
def _reload_after(state, i):
    if i == 1:
        saved = copy.deepcopy(state["opt"].state_dict())
        fresh = torch.optim.Adam(state["model"].parameters(), lr=0.5)   # the checkpoint's lr replaces it
        fresh.load_state_dict(saved)
        state["opt"] = fresh


def _mixup_build():
    state = _with(_opt(torch.optim.SGD, lr=0.1))()
    state["mix_gen"] = torch.Generator().manual_seed(11)   # one per DDP rank, seeded alike
    return state


def _mixup_step(state, batch, carry):
    """Mixup drawn inside the step from the program's own generator (timm's and torchvision's mixup
    draw per process): every DDP rank draws the same lambda and permutes its own batch alike, so the
    result is DDP's, not one device's (one permutation of the whole batch)."""
    x, y = batch
    gen = state["mix_gen"]
    lam = float(torch.rand((), generator=gen, dtype=F64))
    perm = torch.randperm(x.shape[0], generator=gen)
    state["opt"].zero_grad()
    out = state["model"](lam * x + (1 - lam) * x[perm])
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
    loss.backward()
    state["opt"].step()
    return loss.detach(), carry


def _opt(cls, **kw):
    return lambda model: cls(model.parameters(), **kw)


_SGD = _opt(torch.optim.SGD, lr=0.1)
COUNTER = lambda batch_size: (torch.zeros((), dtype=F64),)   # noqa: E731 - the step's index, carried

# DDP's documentation: "DistributedDataParallel does not work with torch.autograd.grad()": nothing is
# all-reduced, each rank applies its own half's gradient and the ranks drift apart.
AUTOGRAD_GRAD = "torch.autograd.grad is not all-reduced by DDP: the ranks drift apart"
# DDP's reducer expects one backward per forward: the second pass's gradients stay each rank's own.
RETAIN_GRAPH = "DDP reduces the first backward of a forward only: the ranks drift apart"
DRIFT = r"was written inside strategy.run outside an optimizer step .* replica 1's copy now differs"

IDIOMS = [
    Program("grad_accumulation", _with(_opt(torch.optim.SGD, lr=0.1, momentum=0.9)), _batches(), _accumulate_step),
    Program("grad_accumulation_keep", _with(_opt(torch.optim.Adam, lr=0.05)), _batches(), _accumulate_keep_step),
    Program("nanogpt_loop", _with(_opt(torch.optim.AdamW, lr=0.1, betas=(0.9, 0.95))), _batches(), _nanogpt_step,
            initial_carry=COUNTER),
    Program("clip_grad_value", _with(_SGD), _batches(), _clip_step(lambda ps: torch.nn.utils.clip_grad_value_(ps, clip_value=0.05))),
    Program("clip_grad_norm_foreach", _with(_opt(torch.optim.SGD, lr=0.1, momentum=0.9)), _batches(),
            _clip_step(lambda ps: torch.nn.utils.clip_grad_norm_(ps, 0.3, foreach=True,
                                                                 error_if_nonfinite=True))),
    Program("zero_grad_keep", _with(_opt(torch.optim.Adam, lr=0.05)), _batches(), _keep_grad_step),
    Program("two_optimizers", _two_optimizers_build, _batches(), _two_optimizers_step),
    Program("add_param_group", _add_group_build, _batches(), _plain_step, after_step=_add_group_after),
    Program("lbfgs_closure", _with(_opt(torch.optim.LBFGS, lr=0.5, max_iter=4, history_size=3)), _batches(),
            _closure_step),
    *(Program(f"autograd_grad_{name}", _manual_build, _batches(), _manual_step(update), ddp_differs=AUTOGRAD_GRAD,
              refused=DRIFT)
      for name, update in (("isub", _isub), ("sub_", lambda p, g, lr: p.sub_(g, alpha=lr)),
                           ("data_sub_", lambda p, g, lr: p.data.sub_(g, alpha=lr)))),   # .data: no version bump
    Program("backward_isub", _manual_build, _batches(), _grad_update_step),
    Program("adam_closure", _with(_opt(torch.optim.Adam, lr=0.05)), _batches(), _closure_step),
    Program("retain_graph", _with(_opt(torch.optim.SGD, lr=0.1)), _batches(), _retain_step,
            ddp_differs=RETAIN_GRAPH),
    Program("adam_foreach", _with(_opt(torch.optim.Adam, lr=0.05, foreach=True)), _batches(), _plain_step),
    Program("adamw_amsgrad", _with(_opt(torch.optim.AdamW, lr=0.05, fused=False, amsgrad=True)), _batches(),
            _plain_step),
    Program("adam_maximize", _with(_opt(torch.optim.Adam, lr=0.05, maximize=True)), _batches(), _plain_step),
    Program("adam_fused", _with(_opt(torch.optim.Adam, lr=0.05, fused=True)), _batches(), _plain_step),
    Program("sgd_nesterov", _with(_opt(torch.optim.SGD, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
            _batches(), _plain_step),
    Program("adagrad", _with(_opt(torch.optim.Adagrad, lr=0.1)), _batches(), _plain_step),
    Program("rmsprop_centered", _with(_opt(torch.optim.RMSprop, lr=0.01, momentum=0.9, centered=True)), _batches(),
            _plain_step),
    Program("one_cycle", _with(_SGD, schedule=lambda o: sched.OneCycleLR(o, max_lr=0.5, total_steps=3)), _batches(),
            _per_batch_step),
    Program("warm_restarts", _with(_SGD, schedule=lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=1, T_mult=2)),
            _batches(), _warm_restarts_step, initial_carry=COUNTER),
    Program("lambda_lr", _with(_SGD, schedule=lambda o: sched.LambdaLR(o, lambda e: 0.5 ** e)), _batches(),
            _plain_step,
            after_step=lambda state, i: state["sched"].step()),
    Program("sequential_lr", _with(_SGD, schedule=_sequential), _batches(), _per_batch_step),
    Program("chained_scheduler", _with(_SGD, schedule=_chained), _batches(), _per_batch_step),
    Program("sparse_adam", _sparse_build, _sparse_batches, _two_optimizers_step),
    Program("model_state_reload", _with(_opt(torch.optim.SGD, lr=0.1, momentum=0.9)), _batches(), _plain_step,
            after_step=_model_reload_after),
    Program("manual_ema", _ema_build, _batches(), _ema_step, models=("model", "ema")),
    Program("optimizer_state_reload", _with(_opt(torch.optim.Adam, lr=0.05)), _batches(), _plain_step,
            after_step=_reload_after),
    Program("mixup_own_generator", _mixup_build, _batches(), _mixup_step, compare_one_device=False),
]

ALL_PROGRAMS = PROGRAMS + IDIOMS + UTILITIES + GPT_PROGRAMS + TORCHVISION_PROGRAMS + VISION_EXAMPLES + IDIOMS2
ALL_PROGRAMS += PYEXAMPLES   # pytorch/examples and tutorials as printed (pyexamples.py)
