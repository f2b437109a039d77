"""Every ``torch.optim`` optimizer and LR scheduler a PyTorch program may use, as small float64 cases:
a model with a bias, a LayerNorm and an Embedding, four steps of the program's own step function,
then its weights, its optimizer's state and its hyperparameters' trace. ``test_optimizer_matrix.py``
runs each case on one device, on MirroredStrategy (2 replicas) and under DDP (2 Gloo processes).

This module imports only torch: the DDP runner must not import multidev.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from sam_optimizer import SAM, sam_closure, sam_two_steps
except ImportError:
    from tests.programs.sam_optimizer import SAM, sam_closure, sam_two_steps

sched = torch.optim.lr_scheduler
F64 = torch.float64
GLOBAL_BATCH = 8
STEPS = 4
ITERS = 2   # batches per "epoch" of the fractional-epoch schedule


class Net(nn.Module):
    """Embedding -> mean over tokens -> Linear -> LayerNorm -> tanh -> Linear: weights, biases, a
    LayerNorm's and an embedding's parameters, as the usual "no decay" groups tell them apart."""

    def __init__(self, sparse: bool = False):
        super().__init__()
        self.emb = nn.Embedding(10, 6, sparse=sparse)
        self.fc = nn.Linear(6, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(torch.tanh(self.norm(self.fc(self.emb(ids).mean(dim=1)))))


def batches() -> list:
    g = torch.Generator().manual_seed(5)
    return [(torch.randint(0, 10, (GLOBAL_BATCH, 4), generator=g), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(STEPS)]


@dataclass
class Case:
    """``make(model) -> {"opt": ..., ["opt2": ...], ["sched": ...]}``; ``step(state, batch, i)`` is
    the program's step (``i``: the step's index as a float64 tensor); ``after(state, i)`` runs
    between steps (an epoch's end, cross-replica); ``torch_refuses``: a regular expression that the
    error torch itself raises on one device matches (every runner must raise it, nothing hangs);
    ``ddp_differs``: why DDP is no reference (compared with one device only); ``shared_storage_refused``:
    what CentralStorageStrategy's refusal says (its replicas update one shared copy)."""

    name: str
    make: Callable[[nn.Module], dict]
    step: Callable[[dict, tuple, torch.Tensor], tuple] = None   # default: plain_step
    after: Callable[[dict, int], None] | None = None
    sparse: bool = False
    torch_refuses: str = ""
    ddp_differs: str = ""
    shared_storage_refused: str = ""

    def __post_init__(self):
        self.step = self.step or plain_step

    def build(self) -> dict:
        torch.manual_seed(3)
        model = Net(self.sparse).double()
        return dict(self.make(model), model=model)


def _optimizers(state: dict) -> list:
    return [state[k] for k in ("opt", "opt2") if k in state]


def _loss(state, batch):
    ids, y = batch
    return F.cross_entropy(state["model"](ids), y)


def plain_step(state, batch, i):
    """zero_grad, backward, step of every optimizer; returns the loss and the lr read in the step."""
    lr = state["opt"].param_groups[0]["lr"]   # read in the step (logged by many loops)
    for opt in _optimizers(state):
        opt.zero_grad()
    loss = _loss(state, batch)
    loss.backward()
    for opt in _optimizers(state):
        opt.step()
    return loss.detach(), torch.tensor(float(lr), dtype=F64)


def keep_grad_step(state, batch, i):
    """``zero_grad(set_to_none=False)``: ``.grad`` zeroed in place, accumulated into."""
    state["opt"].zero_grad(set_to_none=False)
    loss = _loss(state, batch)
    loss.backward()
    state["opt"].step()
    return loss.detach(), torch.tensor(float(state["opt"].param_groups[0]["lr"]), dtype=F64)


def sched_inside_step(state, batch, i):
    """The scheduler stepped per batch inside the step function, after ``optimizer.step()``."""
    loss, lr = plain_step(state, batch, i)
    state["sched"].step()
    return loss, lr


def warm_restarts_step(state, batch, i):
    """torch's documented CosineAnnealingWarmRestarts loop: ``scheduler.step(epoch + i / iters)``."""
    loss, lr = plain_step(state, batch, i)
    epoch, k = divmod(int(i), ITERS)
    state["sched"].step(epoch + k / ITERS)
    return loss, lr


def plateau_step(state, batch, i):
    """``ReduceLROnPlateau.step(loss)`` inside the step with the replica's (the rank's) own loss."""
    loss, lr = plain_step(state, batch, i)
    state["sched"].step(loss)
    return loss, lr


class Keep:
    """Where a step keeps something for a later step: ``strategy.run`` (as TF's) gives each replica its
    own copy of the dicts and lists among its arguments, not of other objects."""


def add_group_in_step(state, batch, i):
    """The head "unfrozen" inside the step function at step 1, before that step's update."""
    if int(i) == 1:
        model = getattr(state["model"], "module", state["model"])
        state["opt"].add_param_group({"params": model.head.parameters(), "lr": 0.01, "amsgrad": True})
    return plain_step(state, batch, i)


def load_in_step(state, batch, i):
    """The optimizer's state saved inside the step after step 1 and loaded back after step 2."""
    out = plain_step(state, batch, i)
    if int(i) == 1:
        state["keep"].saved = copy.deepcopy(state["opt"].state_dict())
    elif int(i) == 2:
        state["opt"].load_state_dict(state["keep"].saved)
    return out


def closure_step(state, batch, i):
    opt = state["opt"]

    def closure():
        opt.zero_grad()
        loss = _loss(state, batch)
        loss.backward()
        return loss

    lr = opt.param_groups[0]["lr"]
    return opt.step(closure).detach(), torch.tensor(float(lr), dtype=F64)


def sched_outside(state, i):
    state["sched"].step()


def warm_restarts_outside(state, i):
    epoch, k = divmod(i + 1, ITERS)
    state["sched"].step(epoch + k / ITERS)


# --- optimizers --------------------------------------------------------------------------------------------
def _opt(cls, **kw):
    return lambda model: {"opt": cls(model.parameters(), **kw)}


def _decay_groups(cls, wd=0.1, **kw):
    """The usual "no weight decay for biases, LayerNorm and embeddings" groups (minGPT, timm, HF)."""
    def make(model):
        decay = [p for n, p in model.named_parameters() if n.endswith("weight") and not n.startswith(("norm", "emb"))]
        rest = [p for n, p in model.named_parameters() if not any(p is q for q in decay)]
        return {"opt": cls([{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}], **kw)}
    return make


def _groups_with_options(model):
    """Groups that differ in more than the decay: their own lr, momentum and nesterov."""
    return {"opt": torch.optim.SGD([
        {"params": model.emb.parameters(), "lr": 0.3},
        {"params": list(model.fc.parameters()) + list(model.norm.parameters()), "momentum": 0.9, "nesterov": True},
        {"params": model.head.parameters(), "momentum": 0.5, "dampening": 0.1, "weight_decay": 0.01,
         "maximize": False}], lr=0.1)}


def _add_group_make(model):
    head = list(model.head.parameters())
    return {"opt": torch.optim.AdamW([p for p in model.parameters() if not any(p is q for q in head)], lr=0.05)}


def _add_group_after(state, i):
    if i == 0:   # "unfreeze" the head after the first step, with its own options
        model = getattr(state["model"], "module", state["model"])
        state["opt"].add_param_group({"params": model.head.parameters(), "lr": 0.01, "amsgrad": True})


def _muon(model):
    """Muon for the 2-D weights (its only kind), AdamW for the rest: Muon's documented recipe."""
    matrices = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith("emb")]
    rest = [p for p in model.parameters() if not any(p is q for q in matrices)]
    return {"opt": torch.optim.Muon(matrices, lr=0.02), "opt2": torch.optim.AdamW(rest, lr=0.01)}


def _sparse(model):
    return {"opt": torch.optim.SparseAdam(list(model.emb.parameters()), lr=0.05),
            "opt2": torch.optim.Adam([p for n, p in model.named_parameters() if not n.startswith("emb")], lr=0.05)}


def _with_sched(make_opt, make_sched):
    def make(model):
        state = make_opt(model)
        state["sched"] = make_sched(state["opt"])
        return state
    return make


def _rewind_after(state, i):
    """The optimizer's state_dict saved after step 1 (a deep copy, as torch.save would) and loaded
    back after step 2: the optimizer rewinds its state; the weights keep training."""
    if i == 0:
        state["saved"] = copy.deepcopy(state["opt"].state_dict())
    elif i == 1:
        state["opt"].load_state_dict(state["saved"])


def _fresh_optimizer_after(state, i):
    """After step 2 a new optimizer loads the live one's ``state_dict()`` without a copy: torch then
    aliases the state tensors of the same dtype and device (both optimizers hold them)."""
    if i == 1:
        fresh = torch.optim.Adam(state["opt"].param_groups[0]["params"], lr=0.5)   # lr replaced by the dict's
        fresh.load_state_dict(state["opt"].state_dict())
        state["opt"] = fresh


class MyAdam(torch.optim.Adam):
    """A user's subclass: not split across replicas (its update might not be per variable), so every
    replica updates its own copies with its own state (the all-reduce path)."""


def _keep(make_opt):
    return lambda model: dict(make_opt(model), keep=Keep())


_SGD = _opt(torch.optim.SGD, lr=0.1, momentum=0.9)
_ADAM = _opt(torch.optim.Adam, lr=0.05)
CPU_CAPTURABLE = r"AssertionError: If capturable=True, .* must be on supported devices"
DIFFERENTIABLE = r"RuntimeError: a leaf Variable that requires grad is being used in an in-place operation"
LBFGS_SHARED = r"ValueError: LBFGS.step\(closure\) cannot run on CentralStorageStrategy: .* re-evaluates the closure"
# first_step's p.add_(e_w) on the one copy, by every replica (its p.data = old_p after hid the write; silently wrong)
SAM_TWO_STEPS_SHARED = (r"ValueError: Variable .* was written in place inside strategy.run outside an optimizer step .* "
                        r"CentralStorageStrategy keeps one copy that all 2 replicas share")
SAM_SHARED = r"ValueError: SAM.step\(closure\) cannot run on CentralStorageStrategy: .* evaluates the closure inside its own step"
PLATEAU_DDP = ("each DDP rank's ReduceLROnPlateau sees its own half's loss: the ranks cut the lr at different steps "
               "and drift apart (multidev feeds every replica's mean: one device's)")

OPTIMIZERS = [
    Case("sgd", _opt(torch.optim.SGD, lr=0.1)),
    Case("sgd_momentum_foreach_false", _opt(torch.optim.SGD, lr=0.1, momentum=0.9, foreach=False)),
    Case("sgd_nesterov_wd_maximize", _opt(torch.optim.SGD, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2,
                                          maximize=True)),
    Case("sgd_fused", _opt(torch.optim.SGD, lr=0.1, momentum=0.9, fused=True)),
    Case("adam_foreach", _opt(torch.optim.Adam, lr=0.05, foreach=True)),
    Case("adam_for_loop_amsgrad", _opt(torch.optim.Adam, lr=0.05, foreach=False, amsgrad=True, weight_decay=0.01)),
    Case("adam_fused_amsgrad_maximize", _opt(torch.optim.Adam, lr=0.05, fused=True, amsgrad=True, maximize=True)),
    Case("adamw_fused", _opt(torch.optim.AdamW, lr=0.05, fused=True, weight_decay=0.1)),
    Case("adamw_decay_groups", _decay_groups(torch.optim.AdamW, lr=0.05, betas=(0.9, 0.95))),
    Case("adagrad_fused", _opt(torch.optim.Adagrad, lr=0.1, fused=True, lr_decay=0.01, weight_decay=0.01)),
    Case("adagrad_foreach_false", _opt(torch.optim.Adagrad, lr=0.1, foreach=False, initial_accumulator_value=0.1)),
    Case("adadelta", _opt(torch.optim.Adadelta, lr=1.0, weight_decay=0.01)),
    Case("adamax", _opt(torch.optim.Adamax, lr=0.05, foreach=False)),
    Case("rmsprop_centered_momentum", _opt(torch.optim.RMSprop, lr=0.01, momentum=0.9, centered=True)),
    Case("rprop", _opt(torch.optim.Rprop, lr=0.01)),
    Case("rprop_maximize_foreach", _opt(torch.optim.Rprop, lr=0.01, maximize=True, foreach=True)),
    Case("asgd", _opt(torch.optim.ASGD, lr=0.05, t0=1, lambd=1e-3)),
    Case("adafactor", _opt(torch.optim.Adafactor, lr=0.05)),
    Case("adafactor_wd_for_loop", _opt(torch.optim.Adafactor, lr=0.05, weight_decay=0.1, foreach=False)),
    Case("nadam", _opt(torch.optim.NAdam, lr=0.05)),
    Case("nadam_decoupled_wd", _opt(torch.optim.NAdam, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True,
                                    momentum_decay=0.004)),
    Case("radam", _opt(torch.optim.RAdam, lr=0.05)),
    Case("radam_decoupled_wd_for_loop", _opt(torch.optim.RAdam, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True,
                                             foreach=False)),
    Case("muon_with_adamw", _muon),
    Case("lbfgs_closure", _opt(torch.optim.LBFGS, lr=0.5, max_iter=4, history_size=3), step=closure_step,
         shared_storage_refused=LBFGS_SHARED),
    Case("lbfgs_strong_wolfe", _opt(torch.optim.LBFGS, lr=1.0, max_iter=3, line_search_fn="strong_wolfe"),
         step=closure_step, shared_storage_refused=LBFGS_SHARED),
    Case("adam_closure", _ADAM, step=closure_step),
    Case("sparse_adam", _sparse, sparse=True),
    Case("sgd_groups_with_options", _groups_with_options),
    Case("add_param_group", _add_group_make, after=_add_group_after),
    Case("zero_grad_keep", _opt(torch.optim.RMSprop, lr=0.01), step=keep_grad_step),
    Case("state_dict_rewind", _decay_groups(torch.optim.Adam, lr=0.05), after=_rewind_after),
    Case("state_dict_into_fresh", _ADAM, after=_fresh_optimizer_after),
    Case("add_param_group_in_step", _add_group_make, step=add_group_in_step),
    Case("state_dict_rewind_in_step", _keep(_decay_groups(torch.optim.Adam, lr=0.05)), step=load_in_step),
    Case("subclass_rewind_in_step", _keep(_opt(MyAdam, lr=0.05, amsgrad=True)), step=load_in_step),
    Case("adam_capturable", _opt(torch.optim.Adam, lr=0.05, capturable=True), torch_refuses=CPU_CAPTURABLE),
    Case("nadam_capturable", _opt(torch.optim.NAdam, lr=0.05, capturable=True), torch_refuses=CPU_CAPTURABLE),
    Case("adam_differentiable", _opt(torch.optim.Adam, lr=0.05, differentiable=True), torch_refuses=DIFFERENTIABLE),
    # SAM as printed (davda54/sam): p.data = old_p from its state; step(closure) evaluating at w + e(w)
    Case("sam_sgd_two_steps", _opt(SAM, base_optimizer=torch.optim.SGD, lr=0.1, momentum=0.9),
         step=sam_two_steps(_loss), shared_storage_refused=SAM_TWO_STEPS_SHARED),
    Case("sam_sgd_closure", _opt(SAM, base_optimizer=torch.optim.SGD, lr=0.1, momentum=0.9),
         step=sam_closure(_loss), shared_storage_refused=SAM_SHARED),
    Case("asam_adam_closure", _opt(SAM, base_optimizer=torch.optim.Adam, rho=0.5, adaptive=True, lr=0.05),
         step=sam_closure(_loss), shared_storage_refused=SAM_SHARED),
]


def _sequential(opt):
    return sched.SequentialLR(opt, [sched.LinearLR(opt, start_factor=0.5, total_iters=2),
                                    sched.ExponentialLR(opt, gamma=0.8)], milestones=[2])


def _chained(opt):
    return sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.5, total_iters=2), sched.ExponentialLR(opt, gamma=0.9)])


SCHEDULES = {
    "cyclic_momentum": (_SGD, lambda o: sched.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                       base_momentum=0.8, max_momentum=0.9)),
    "cyclic_betas": (_ADAM, lambda o: sched.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=1, mode="triangular2",
                                                     base_momentum=0.85, max_momentum=0.95)),
    "lambda": (_SGD, lambda o: sched.LambdaLR(o, lambda e: 0.7 ** e)),
    "multiplicative": (_decay_groups(torch.optim.AdamW, lr=0.05),
                       lambda o: sched.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 0.5])),
    "polynomial": (_SGD, lambda o: sched.PolynomialLR(o, total_iters=3, power=2.0)),
    "sequential": (_SGD, _sequential),
    "chained": (_ADAM, _chained),
    "one_cycle": (_ADAM, lambda o: sched.OneCycleLR(o, max_lr=0.1, total_steps=STEPS)),
    "step": (_SGD, lambda o: sched.StepLR(o, step_size=2, gamma=0.3)),
    "multistep": (_ADAM, lambda o: sched.MultiStepLR(o, milestones=[1, 3], gamma=0.5)),
    "cosine": (_SGD, lambda o: sched.CosineAnnealingLR(o, T_max=STEPS, eta_min=0.01)),
    "swa_lr": (_SGD, lambda o: torch.optim.swa_utils.SWALR(o, swa_lr=0.02, anneal_epochs=2)),
    "tensor_lr_fused": (lambda model: {"opt": torch.optim.Adam(model.parameters(), lr=torch.tensor(0.05), fused=True)},
                        lambda o: sched.ExponentialLR(o, gamma=0.7)),   # the scheduler fills the lr tensor in place
}

SCHEDULERS = [
    *(Case(f"{name}_inside", _with_sched(*parts), step=sched_inside_step) for name, parts in SCHEDULES.items()),
    *(Case(f"{name}_outside", _with_sched(*parts), after=sched_outside) for name, parts in SCHEDULES.items()),
    Case("warm_restarts_inside", _with_sched(_SGD, lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=1, T_mult=2)),
         step=warm_restarts_step),
    Case("warm_restarts_outside", _with_sched(_ADAM, lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=1)),
         after=warm_restarts_outside),
    Case("plateau_inside", _with_sched(_SGD, lambda o: sched.ReduceLROnPlateau(o, factor=0.5, patience=0, threshold=0.0)),
         step=plateau_step, ddp_differs=PLATEAU_DDP),
]

CASES = OPTIMIZERS + SCHEDULERS


def _numbers(value: Any) -> list:
    """Every number in an optimizer state entry (tensors, lists of tensors, Python numbers), flat."""
    if isinstance(value, torch.Tensor):
        return value.detach().to_dense().double().reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return []


def optimizer_record(state: dict) -> dict:
    """Each optimizer's state (by parameter index and key, every number) and its groups' hyperparameters."""
    out = {}
    for key in ("opt", "opt2"):
        if key in state:
            saved = state[key].state_dict()
            out[key] = {"state": {f"{i}.{k}": _numbers(v) for i, entry in sorted(saved["state"].items())
                                  for k, v in sorted(entry.items())},
                        "groups": [{k: _numbers(v) for k, v in g.items() if k != "params"} for g in saved["param_groups"]]}
    return out


def parameters(state: dict) -> list:
    model = state["model"]
    return list(getattr(model, "module", model).parameters())
