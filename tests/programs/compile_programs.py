"""``torch.compile`` idioms of PyTorch 2 training programs, written as their authors write them.

Each program builds a tiny float64 model and its optimizer (``build``), compiles what the idiom
compiles once the model is wrapped (``prepare(state, compiled)``: DDP's runner wraps the model in
``DistributedDataParallel`` first, so ``torch.compile(model)`` there is "compiled DDP", with DDP's
graph-break optimizer) and trains with its own ``step``. The same code runs three ways
(``run_compile.py``): eagerly on one device over the global batch (``compiled=False``: the
reference), under DDP on 2 Gloo processes, and ported with two lines to MirroredStrategy on 2
logical CPUs (``build`` in ``strategy.scope()``, ``step`` in ``strategy.run``).

Compiling is slow on a 2-core machine: dynamo's ``eager``/``aot_eager`` backends where inductor adds
nothing to the check (dynamo's tracing, guards and graph breaks are the same), inductor for
``mode="reduce-overhead"`` only. This module imports only torch (the DDP runner must not import
multidev); ``jit_compile`` programs import multidev inside their ``prepare``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

F64 = torch.float64
GLOBAL_BATCH = 8


@dataclass
class CompiledProgram:
    """A program: ``build() -> state``, ``prepare(state, compiled)`` (what it compiles), ``step(state,
    batch) -> loss``; the ``torch._dynamo.config`` knobs it sets; ``refused``: a regular expression
    multidev's error matches (never a silent difference); ``multidev_only``: an md API (DDP has none)."""

    name: str
    prepare: Callable[[dict, bool], None]
    step: Callable[[dict, tuple], torch.Tensor]
    build: Callable[[], dict] = field(default=lambda: _build(torch.optim.Adam, lr=0.05))
    batch_sizes: tuple = (GLOBAL_BATCH,) * 4
    dynamo_config: dict = field(default_factory=dict)
    refused: str = ""
    multidev_only: bool = False
    compare_one_device: bool = True   # False: torch's mean loss per rank over unequal halves (DDP's result)
    inductor: bool = False    # needs a C++ compiler; run on multidev only (compiling it is slow)


def _build(optimizer: type, **settings: Any) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2)).to(F64)
    return {"model": model, "opt": optimizer(model.parameters(), **settings)}


def _build_dropout() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.25), nn.Linear(8, 2)).to(F64)
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1)}


def batches(sizes: tuple) -> list:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(n, 4, generator=g, dtype=F64), torch.randn(n, 2, generator=g, dtype=F64)) for n in sizes]


def _compile(compiled: bool, fn: Callable, **options: Any) -> Callable:
    return torch.compile(fn, **options) if compiled else fn


# --- torch.compile(model): the forward compiled, the loop eager (DDP: torch.compile(DDP(model))) -----------
def _model_step(state: dict, batch: tuple) -> torch.Tensor:
    x, y = batch
    state["opt"].zero_grad()
    loss = F.mse_loss(state["forward"](x), y)
    loss.backward()
    state["opt"].step()
    return loss.detach()


def _compiled_model(**options: Any) -> Callable[[dict, bool], None]:
    def prepare(state: dict, compiled: bool) -> None:
        state["forward"] = _compile(compiled, state["model"], **options)
    return prepare


# --- a compiled train step: zero_grad, forward, backward and optimizer step in one compiled function ------
def _train_step_of(state: dict) -> Callable:
    """The loop body of ``_model_step`` on the plain model, as one function to compile (dynamo inlines it)."""
    plain = dict(state, forward=state["model"])

    def train_step(x, y):
        return _model_step(plain, (x, y))
    return train_step


def _compiled_train_step(state: dict, compiled: bool) -> None:
    state["train_step"] = _compile(compiled, _train_step_of(state), backend="eager")


def _run_train_step(state: dict, batch: tuple) -> torch.Tensor:
    return state["train_step"](*batch)


def _build_with_scheduler() -> dict:
    state = _build(torch.optim.SGD, lr=0.2, momentum=0.9)
    state["sched"] = torch.optim.lr_scheduler.StepLR(state["opt"], step_size=1, gamma=0.5)
    return state


def _train_step_then_scheduler(state: dict, batch: tuple) -> torch.Tensor:
    loss = state["train_step"](*batch)
    state["sched"].step()   # (it checks that the optimizer stepped first: torch's wrapper on the user's object)
    return loss


# --- the compiled optimizer tutorial: @torch.compile(fullgraph=False) def fn(): opt.step() ----------------
def _compiled_optimizer_step(state: dict, compiled: bool) -> None:
    opt = state["opt"]

    def fn():
        opt.step()
    state["opt_step"] = _compile(compiled, fn, fullgraph=False, backend="eager")


def _opt_step(state: dict, batch: tuple) -> torch.Tensor:
    x, y = batch
    state["opt"].zero_grad()
    loss = F.mse_loss(state["model"](x), y)
    loss.backward()
    state["opt_step"]()
    return loss.detach()


# --- LBFGS: a compiled step whose optimizer calls its closure itself --------------------------------------
def _lbfgs_step(state: dict, compiled: bool) -> None:
    model, opt = state["model"], state["opt"]

    def train_step(x, y):
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss
        return opt.step(closure).detach()
    state["train_step"] = _compile(compiled, train_step, backend="eager")


# --- md.function(jit_compile=True) / experimental_compile around the whole step (multidev's API) ----------
def _md_function(**options: Any) -> Callable[[dict, bool], None]:
    def prepare(state: dict, compiled: bool) -> None:
        import multidev as md

        chosen = options if compiled else {}
        state["train_step"] = md.function(_train_step_of(state), backend="eager", **chosen) if chosen \
            else _train_step_of(state)
    return prepare


PROGRAMS = [
    CompiledProgram("compiled_model", _compiled_model(backend="aot_eager"), _model_step),
    CompiledProgram("compiled_model_fullgraph", _compiled_model(backend="aot_eager", fullgraph=True), _model_step),
    # A partial last batch (7 over 2: 4 and 3): dynamo recompiles once for the new shape, marking it dynamic;
    # each rank's mean loss over its unequal half is DDP's result, not one device's.
    CompiledProgram("compiled_model_partial_batch", _compiled_model(backend="aot_eager"), _model_step,
                    batch_sizes=(8, 8, 7, 8), compare_one_device=False),
    CompiledProgram("compiled_model_sgd_momentum", _compiled_model(backend="aot_eager"), _model_step,
                    build=lambda: _build(torch.optim.SGD, lr=0.1, momentum=0.9)),
    # Dropout in a compiled forward: each replica draws as the DDP rank of its index (a graph break on replicas
    # that share a device: the draw runs eagerly on the replica's stream); masks differ from one device's.
    CompiledProgram("compiled_model_dropout", _compiled_model(backend="aot_eager"), _model_step,
                    build=_build_dropout, compare_one_device=False),
    CompiledProgram("compiled_train_step", _compiled_train_step, _run_train_step),
    CompiledProgram("compiled_train_step_scheduler", _compiled_train_step, _train_step_then_scheduler,
                    build=_build_with_scheduler),
    CompiledProgram("compiled_optimizer_step", _compiled_optimizer_step, _opt_step),
    CompiledProgram("compiled_optimizer_step_adamw_foreach", _compiled_optimizer_step, _opt_step,
                    build=lambda: _build(torch.optim.AdamW, lr=0.05, weight_decay=0.1, foreach=True)),
    # One cache entry per frame: the second replica's guard (its replica id) fails and it runs eagerly.
    CompiledProgram("recompile_limit_1", _compiled_model(backend="aot_eager"), _model_step,
                    dynamo_config={"recompile_limit": 1}),
    CompiledProgram("compiled_autograd", _compiled_train_step, _run_train_step,
                    dynamo_config={"compiled_autograd": True},
                    refused=r"NotImplementedError: torch\._dynamo\.config\.compiled_autograd=True cannot run with 2 "
                            r"replicas.*compiled_autograd = False"),
    CompiledProgram("lbfgs_compiled_step", _lbfgs_step, _run_train_step,
                    build=lambda: _build(torch.optim.LBFGS, lr=0.5, max_iter=3),
                    refused=r"NotImplementedError: LBFGS\.step\(\) was called from torch\.compile'd code.*LBFGS's.*"
                            r"torch\.compiler\.disable"),
    CompiledProgram("md_function_jit_compile", _md_function(jit_compile=True), _run_train_step, multidev_only=True),
    CompiledProgram("md_function_experimental_compile", _md_function(experimental_compile=True), _run_train_step,
                    multidev_only=True),
    CompiledProgram("reduce_overhead_inductor", _compiled_model(mode="reduce-overhead"), _model_step, inductor=True),
]


def parameters(state: dict) -> list:
    """The trained parameters in a fixed order (a DDP wrapper's module's)."""
    model = state["model"]
    return list(getattr(model, "module", model).parameters())
