"""How far a gradient travels through multidev's code in one training step: hop counts, measured.

    python -m multidev.bench.update_hops [--list] [--json]   # a table (--list: every hop, in call order)

It runs in its own interpreter (it configures 2 logical CPU devices, which a process does once)
three training programs on ``MirroredStrategy(["/cpu:0", "/cpu:1"])``:

* ``md_keras_fit``: an ``md.keras.Sequential`` of Dense layers compiled with SGD, ``model.fit``;
* ``torch_optim``: a ``torch.nn.Module`` and ``torch.optim.SGD`` in a custom loop inside
  ``strategy.run`` (``loss.backward(); optimizer.step()``);
* ``keras3_fit``: a Keras 3 model compiled with SGD, Keras's own ``fit`` on the strategy (only when
  Keras 3 is importable on the torch backend; else reported as skipped).

Definitions (issue 26 item 5 compares the figures with a target, so they are exact):

* **The update region**, per replica thread, in the *second* training step (the first builds
  optimizer slots, plans and buckets lazily and is not measured): it opens at the call of torch's
  autograd entry (``Tensor.backward``, ``torch.autograd.backward`` or ``torch.autograd.grad``)
  and closes when the optimizer's update call returns: the outermost frame, entered after the
  opening, of ``type(optimizer).step`` (torch: the wrapper that runs the step hooks),
  ``.apply_gradients`` (md.keras) or ``.apply`` (Keras 3, multidev's wrapper) whose ``self`` is the
  program's optimizer. Every replica thread has one region; the report is the union over them
  (the last replica to reach a collective combines, which replica that is varies from step to
  step, the union of both does not). The gradient reduction, the update rule and the writes of
  every copy happen inside it; forward, loss and metrics do not.
* **A caller** is the nearest frame up the stack that is not the standard library's or generated
  code (``contextlib``, ``functools``, ``threading``, ``<string>``) nor torch's decorator form of
  ``no_grad``/``enable_grad`` (``torch/utils/_contextlib.py``): those only pass a call on.
* **A file-crossing call (crossing)**: a call in the region whose caller and callee are both in
  multidev's files and the files differ. Counted as distinct edges
  ``caller file:function -> callee file:function`` (the same edge taken per variable or per replica
  counts once). Calls within one file are not counted; comprehension frames count as their function.
* **An entry**: a call in the region from a library's file (torch's hooks and ``__torch_function__``,
  Keras's methods) into multidev: the hops the reader cannot see at any call site. Counted the
  same way, per library. The program's own calls (this file) are neither.
* **A mode call** (reported apart, not a hop): a call of a torch mode's ``__torch_function__``
  (``placement/replica_random.py``'s mode, pushed in every replica thread whose torch device other
  replicas share, as logical CPUs do). Every torch op of the thread passes through it, whatever file
  makes it, so it says how many functions do torch ops, not how the gradient travels; the mode's frame
  is skipped when finding a caller. ``mode`` in the table: distinct functions intercepted.
* **hops** = crossings + entries; **files**: the multidev files at either end of a hop;
  **back and forth**: file pairs with a crossing each way (a callback, such as the combine function a
  collective's last arrival runs for the others, is a crossing back).

A region that never closes (the update method renamed) is an error, not a measurement. Target (issue 26,
tests/api/test_update_hops.py): at most 10 hops per scenario, no back-and-forth pair. Recorded with
``sys.setprofile``/``threading.setprofile`` in the armed step only; the figures do not depend on timing.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import os
import sys
import sysconfig
import threading
from typing import Any, Callable

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # .../multidev/
SELF = os.path.abspath(__file__)        # the programs below are "the program", not multidev
STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
LIBRARY_DIRS = ("site-packages", "dist-packages")
PASS_THROUGH = {"torch/utils/_contextlib.py"}   # @torch.no_grad() & co. as decorators: torch's contextlib
DEVICES = ["/cpu:0", "/cpu:1"]
COMPREHENSIONS = (".<locals>.<listcomp>", ".<locals>.<dictcomp>", ".<locals>.<setcomp>")
SCENARIOS = ("md_keras_fit", "torch_optim", "keras3_fit")


@functools.lru_cache(maxsize=None)
def _where(filename: str) -> tuple[str, str]:
    """``(kind, short name)`` of a code file: kind is multidev, program, library, or plumbing (passes calls on)."""
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path == SELF:
        return "program", "update_hops.py"
    if path.startswith(PACKAGE):
        return "multidev", path[len(PACKAGE):].replace(os.sep, "/")
    parts = path.replace(os.sep, "/").split("/")
    for marker in LIBRARY_DIRS:
        if marker in parts:
            short = "/".join(parts[parts.index(marker) + 1:])
            return ("plumbing" if short in PASS_THROUGH else "library"), short
    if path.startswith("<") or path.startswith(STDLIB):
        return "plumbing", path
    return "program", path


def _function(code: Any) -> str:
    name = getattr(code, "co_qualname", code.co_name)
    for suffix in COMPREHENSIONS:  # run at once, inlined since Python 3.12 (PEP 709): their function
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _mode_codes() -> Callable[[Any], bool]:
    """``is_mode(frame)``: the frame runs a torch mode's ``__torch_function__``/``__torch_dispatch__``."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    known: dict = {}

    def is_mode(frame: Any) -> bool:
        code = frame.f_code
        if code.co_name not in ("__torch_function__", "__torch_dispatch__"):
            return False
        if code not in known:
            known[code] = isinstance(frame.f_locals.get("self"), (TorchFunctionMode, TorchDispatchMode))
        return known[code]

    return is_mode


class _Region:
    """One replica thread's update region: its state and its hops in call order."""

    def __init__(self, thread_name: str):
        self.thread_name = thread_name
        self.update_frame = None
        self.closed = False
        self.hops: list[tuple[str, str, str]] = []   # (kind, caller, callee), first occurrence order
        self._seen: set = set()

    def add(self, kind: str, caller: str, callee: str) -> None:
        if (kind, caller, callee) not in self._seen:
            self._seen.add((kind, caller, callee))
            self.hops.append((kind, caller, callee))


class Recorder:
    """A profile function for every thread: records hops inside each thread's update region while armed."""

    def __init__(self):
        import torch
        self._openers = {torch.Tensor.backward.__code__, torch.autograd.backward.__code__,
                         torch.autograd.grad.__code__}
        self._armed = False
        self._optimizer = None
        self._update_code = None
        self.regions: dict[int, _Region] = {}
        self._is_mode = _mode_codes()

    def install(self) -> None:
        """For this thread and every thread started from now on (replica threads start with their strategy)."""
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)

    def arm(self, optimizer: Any, update_method: str) -> None:
        self.regions = {}
        self._optimizer = optimizer
        self._update_code = getattr(type(optimizer), update_method).__code__
        gc.disable()  # no finalizer of an unrelated object runs inside a region
        self._armed = True

    def disarm(self) -> list[_Region]:
        self._armed = False
        gc.enable()
        return sorted(self.regions.values(), key=lambda region: region.thread_name)

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if not self._armed or event not in ("call", "return"):
            return
        region = self.regions.get(threading.get_ident())
        if region is None:
            if event == "call" and frame.f_code in self._openers:
                self.regions[threading.get_ident()] = _Region(threading.current_thread().name)
            return
        if region.closed:
            return
        if event == "return":
            region.closed = frame is region.update_frame  # (False until then: a closed region returned above)
            return
        if region.update_frame is None and frame.f_code is self._update_code and self._is_update(frame):
            region.update_frame = frame
        self._record(region, frame)

    def _is_update(self, frame: Any) -> bool:
        local = frame.f_locals
        args = local.get("args") or (None,)
        return local.get("self", args[0]) is self._optimizer

    def _record(self, region: _Region, frame: Any) -> None:
        kind, callee = _where(frame.f_code.co_filename)
        if kind != "multidev":
            return
        caller = frame.f_back
        while caller is not None and (_where(caller.f_code.co_filename)[0] == "plumbing" or self._is_mode(caller)):
            caller = caller.f_back  # a mode passes the op on: the op's caller is the caller
        if caller is None:
            return
        caller_kind, caller_file = _where(caller.f_code.co_filename)
        edge = (f"{caller_file}:{_function(caller.f_code)}", f"{callee}:{_function(frame.f_code)}")
        if self._is_mode(frame):
            region.add("mode", *edge)
        elif caller_kind == "library":
            region.add("entry", *edge)
        elif caller_kind == "multidev" and caller_file != callee:
            region.add("crossing", *edge)


def summarize(name: str, regions: list, replicas: int) -> dict:
    """The scenario's report from its replicas' regions (see the module docstring for the terms)."""
    if len(regions) != replicas or not all(region.closed for region in regions):
        raise RuntimeError(f"{name}: expected one closed update region per replica ({replicas}), got "
                           f"{[(r.thread_name, r.closed) for r in regions]}: the region's definition no "
                           "longer matches the code (see multidev/bench/update_hops.py's docstring)")
    edges, seen = [], set()
    for region in regions:
        for kind, caller, callee in region.hops:
            if (kind, caller, callee) not in seen:
                seen.add((kind, caller, callee))
                edges.append({"kind": kind, "caller": caller, "callee": callee})
    hops = [e for e in edges if e["kind"] != "mode"]
    crossings = [h for h in hops if h["kind"] == "crossing"]
    pairs = {(_file(h["caller"]), _file(h["callee"])) for h in crossings}
    both_ways = sorted({tuple(sorted(p)) for p in pairs if (p[1], p[0]) in pairs})
    files = sorted({_file(h["callee"]) for h in hops} | {_file(h["caller"]) for h in crossings})
    return {"scenario": name, "replicas": replicas, "hops": len(hops), "crossings": len(crossings),
            "entries": len(hops) - len(crossings), "entries_by_library": _count(h["caller"].split("/")[0]
                                                                              for h in hops if h["kind"] == "entry"),
            "files": files, "back_and_forth": [list(p) for p in both_ways],
            "mode_callers": _count(e["callee"] for e in edges if e["kind"] == "mode"), "edges": edges}


def _file(function: str) -> str:
    return function.split(":")[0]


def _count(names) -> dict[str, int]:
    return dict(sorted(collections.Counter(names).items()))


# ----- the programs -------------------------------------------------------------------------------------

def _data(torch: Any):
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 4, generator=g), torch.randn(16, 2, generator=g)


def _fit_with_armed_second_step(fit: Callable, callback_base: type, recorder: Recorder, optimizer: Callable,
                                update_method: str) -> list:
    """``fit(callbacks)`` over 2 steps; the recorder is armed around the second (batch index 1)."""
    got: list = []

    class ArmSecondStep(callback_base):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 1:
                recorder.arm(optimizer(), update_method)

        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                got.extend(recorder.disarm())

    fit([ArmSecondStep()])
    return got


def md_keras_fit(md: Any, torch: Any, recorder: Recorder) -> list:
    strategy = md.distribute.MirroredStrategy(DEVICES)
    layers = md.keras.layers
    with strategy.scope():
        model = md.keras.Sequential([md.keras.Input((4,)), layers.Dense(8, activation="relu"), layers.Dense(2)])
        model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss="mse")
    x, y = _data(torch)
    fit = lambda callbacks: model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    return _fit_with_armed_second_step(fit, md.keras.callbacks.Callback, recorder, lambda: model.optimizer,
                                       "apply_gradients")


def torch_optim(md: Any, torch: Any, recorder: Recorder) -> list:
    strategy = md.distribute.MirroredStrategy(DEVICES)
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _data(torch)

    def replica_step(x, y):
        optimizer.zero_grad()
        loss = md.nn.compute_average_loss(((model(x) - y) ** 2).sum(1), global_batch_size=8)
        loss.backward()
        optimizer.step()

    def batch(step: int) -> tuple:
        rows = slice(8 * step, 8 * step + 8)
        return tuple(md.distribute.PerReplica(tuple(torch.tensor_split(t[rows], 2))) for t in (x, y))

    strategy.run(replica_step, args=batch(0))
    recorder.arm(optimizer, "step")
    try:
        strategy.run(replica_step, args=batch(1))
    finally:
        regions = recorder.disarm()
    return regions


def keras3_fit(md: Any, torch: Any, recorder: Recorder) -> list | str:
    """Keras 3 on the torch backend; returns why it was skipped instead when it cannot run here."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "torch"
    try:
        import keras
    except ImportError as exc:
        return f"Keras 3 is not importable ({exc})"
    if not str(keras.__version__).startswith("3.") or keras.backend.backend() != "torch":
        return f"needs Keras 3 on the torch backend, found keras {keras.__version__} on {keras.backend.backend()!r}"
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x, y = _data(torch)
    fit = lambda callbacks: model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
    return _fit_with_armed_second_step(fit, keras.callbacks.Callback, recorder, lambda: model.optimizer, "apply")


PROGRAMS = {"md_keras_fit": md_keras_fit, "torch_optim": torch_optim, "keras3_fit": keras3_fit}


def measure(scenarios=SCENARIOS) -> dict:
    """Configure 2 logical CPUs (a fresh interpreter only), run the scenarios, return the report."""
    import torch
    import multidev as md

    torch.set_num_threads(1)
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * len(DEVICES))
    recorder = Recorder()
    recorder.install()
    report: dict = {"devices": DEVICES, "scenarios": [], "skipped": {}}
    try:
        for name in scenarios:
            regions = PROGRAMS[name](md, torch, recorder)
            if isinstance(regions, str):
                report["skipped"][name] = regions
            else:
                report["scenarios"].append(summarize(name, regions, len(DEVICES)))
    finally:
        threading.setprofile(None)
        sys.setprofile(None)
    return report


# ----- output -------------------------------------------------------------------------------------------

def format_table(report: dict) -> str:
    """The human table: one line a scenario, then the back-and-forth pairs."""
    head = (f"{'scenario':14s} {'hops':>5s} {'crossings':>10s} {'entries':>8s} {'files':>6s} {'back+forth':>11s} "
            f"{'mode':>5s}  entries from")
    lines = [head, "-" * len(head)]
    for s in report["scenarios"]:
        libraries = ", ".join(f"{lib} {n}" for lib, n in s["entries_by_library"].items()) or "-"
        lines.append(f"{s['scenario']:14s} {s['hops']:5d} {s['crossings']:10d} {s['entries']:8d} {len(s['files']):6d} "
                     f"{len(s['back_and_forth']):11d} {sum(s['mode_callers'].values()):5d}  {libraries}")
    for name, why in report["skipped"].items():
        lines.append(f"{name:14s} skipped: {why}")
    for s in report["scenarios"]:
        if s["back_and_forth"]:
            lines.append(f"{s['scenario']} back and forth: " + "; ".join(" <-> ".join(p) for p in s["back_and_forth"]))
    return "\n".join(lines)


def format_list(report: dict) -> str:
    """Every edge in call order (replica 0's first, then those only another replica took); E: entry, M: mode."""
    lines = []
    for s in report["scenarios"]:
        lines.append(f"{s['scenario']}: {s['hops']} hops over {len(s['files'])} files ({', '.join(s['files'])})")
        for i, edge in enumerate(s["edges"], 1):
            mark = {"crossing": "  ", "entry": "E ", "mode": "M "}[edge["kind"]]
            lines.append(f"  {i:2d} {mark}{edge['caller']} -> {edge['callee']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m multidev.bench.update_hops", description=__doc__.split("\n")[0],
                                     epilog="Definitions: the module docstring (pydoc multidev.bench.update_hops).")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--list", action="store_true", help="also print every hop in call order (E: an entry)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated subset of {', '.join(SCENARIOS)} (default: all)")
    args = parser.parse_args(argv)
    scenarios = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in scenarios if n not in PROGRAMS]
    if unknown or not scenarios:
        parser.error(f"unknown scenario(s) {unknown or args.scenarios!r}; valid: {', '.join(SCENARIOS)}")
    report = measure(scenarios)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(format_table(report))
        if args.list:
            print(format_list(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
