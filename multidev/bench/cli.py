"""``multidev bench``: the reference benchmarks of issue 8.

    multidev bench [train]       training step time of every variant (plain, strategies, fit, DDP, MWMS)
    multidev bench train --variants plain,keras3_own,keras3_fit1,keras3_fit2
                                 Keras 3's own fit, alone and on multidev strategies (needs multidev[keras3])
    multidev bench collectives   all-reduce bandwidth, in process and across 2 processes
    multidev bench memory        long run under MirroredStrategy: is memory flat after warm-up?
    multidev bench scaling       per-step Python cost at N = 1, 2, 4, 8 replicas: threads vs processes
    multidev bench all           the three, one report

``--smoke`` runs a tiny version of each for correctness (CI); it times nothing worth reading.
``--json`` prints the machine-readable report instead of the tables; ``--output FILE`` writes it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from multidev.bench import child, report, scaling
from multidev.bench import keras3_variants
from multidev.bench.variants import ALL_VARIANTS, DEFAULT_VARIANTS, INPROCESS_VARIANTS, PROCESS_VARIANTS
from multidev.bench.workloads import WORKLOADS

SUITES = ("train", "collectives", "memory", "scaling", "all")
FULL_SIZES = [2**10 * 4**i for i in range(10)]        # 1 KB .. 256 MB
SMOKE_MAX_SIZE = 64 * 2**10


def _names(text: str, valid, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown or text!r}; valid: {', '.join(valid)}")
    return names


def _counts(text: str) -> list[int]:
    try:
        counts = sorted({int(n) for n in text.split(",") if n.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1 or 1 not in counts:
        raise argparse.ArgumentTypeError(f"--counts takes comma-separated replica counts including 1 (the baseline), "
                                         f"e.g. 1,2,4,8; got {text!r}")
    return counts


def _say(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``multidev bench`` (also ``python -m multidev.bench``)."""
    parser.add_argument("suite", nargs="?", default="train", choices=SUITES, help="what to run (default: train)")
    parser.add_argument("--workloads", type=lambda s: _names(s, list(WORKLOADS), "workload"),
                        help=f"comma-separated, default all ({', '.join(WORKLOADS)}); --smoke: text_conv")
    parser.add_argument("--variants", type=lambda s: _names(s, ALL_VARIANTS, "variant"),
                        help=f"comma-separated (valid: {', '.join(ALL_VARIANTS)}); default all but the Keras 3 "
                        f"ones ({', '.join(keras3_variants.KERAS3_VARIANTS)}: Keras 3's own fit, {keras3_variants.INSTALL_HINT})")
    parser.add_argument("--steps", type=int, help="steps per variant per round (train, default 30); "
                        "total steps (memory, default 10000)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 5; collectives 3)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 5; memory 500)")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="run on logical CPUs or logical GPUs (auto: GPU when one is visible)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads of the in-process children "
                        "(default: torch's choice, one per core); the two-process variants always use 1 per process")
    parser.add_argument("--max-size", type=int, help="largest all-reduce buffer in bytes (default 256 MB)")
    parser.add_argument("--replicas", type=int, default=2, help="replicas of the memory run (default 2)")
    parser.add_argument("--memory-workload", default="text_conv", choices=sorted(WORKLOADS),
                        help="workload of the memory run (default text_conv)")
    parser.add_argument("--counts", type=_counts, help="replica counts of the scaling run (default 1,2,4,8; --smoke: 1,2)")
    parser.add_argument("--smoke", action="store_true", help="tiny run for correctness only (CI)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--output", help="also write the JSON report to this file")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds allowed per child process")


def _device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def _train(args) -> dict:
    workloads = args.workloads or (["text_conv"] if args.smoke else list(WORKLOADS))
    chosen = args.variants or list(DEFAULT_VARIANTS)
    keras3 = [v for v in chosen if v in keras3_variants.KERAS3_VARIANTS]
    if keras3:
        reason = keras3_variants.keras_missing()
        if reason:
            raise child.BenchChildError(f"{reason} (asked for {', '.join(keras3)}).")
    spec = {"workloads": workloads, "steps": args.steps or (2 if args.smoke else 30),
            "rounds": args.rounds or (1 if args.smoke else 5), "warmup": args.warmup or (1 if args.smoke else 5),
            "device": _device(args.device), "threads": args.threads}
    results: dict = {w: {} for w in workloads}
    machine = None
    inprocess = [v for v in chosen if v in INPROCESS_VARIANTS]
    if inprocess:
        out = child.run_one("multidev.bench.train_inprocess", {**spec, "variants": inprocess}, args.timeout,
                            threads=args.threads)
        machine = out["machine"]
        for w in workloads:
            results[w].update(out["results"][w])
    processes = [v for v in chosen if v in PROCESS_VARIANTS]
    if processes:
        out = child.run_workers("multidev.bench.train_multiproc", {**spec, "variants": processes, "threads": 1}, 2,
                                args.timeout)
        for w in workloads:
            _say(f"{w}: " + ", ".join(f"{v} {r['step_s']['median'] * 1e3:.2f} ms/step" for v, r in out["results"][w].items()))
        machine = machine or out["machine"]
        for w in workloads:
            results[w].update(out["results"][w])
    notes = [f"{', '.join(keras3)} skipped for {w}: no Keras 3 model of it (they run on "
             f"{', '.join(sorted(keras3_variants.MODELS))})" for w in workloads if keras3 and not keras3_variants.supports(w)]
    return {"spec": spec, "results": results, "machine": machine, "notes": notes}


def _collectives(args) -> dict:
    top = args.max_size or (SMOKE_MAX_SIZE if args.smoke else FULL_SIZES[-1])
    sizes = [s for s in FULL_SIZES if s <= top] or [top]
    spec = {"sizes": sizes, "rounds": args.rounds or (1 if args.smoke else 3), "target_s": 0.005 if args.smoke else 0.2,
            "replicas": [2, 4], "device": _device(args.device), "memcpy_bytes": SMOKE_MAX_SIZE if args.smoke else 256 * 2**20}
    local = child.run_one("multidev.bench.collectives_inprocess", spec, args.timeout)
    remote = child.run_workers("multidev.bench.collectives_multiproc", spec, 2, args.timeout)
    memcpy = local["memcpy"]
    rows = report.collective_rows(local["rows"] + remote["rows"], memcpy["bytes_per_s"])
    return {"spec": spec, "rows": rows, "memcpy": memcpy, "machine": local["machine"]}


def _memory(args) -> dict:
    steps = args.steps if args.steps and args.suite == "memory" else (40 if args.smoke else 10000)
    warmup = args.warmup if args.warmup and args.suite == "memory" else (10 if args.smoke else 500)
    spec = {"workload": args.memory_workload, "steps": steps, "warmup": min(warmup, steps - 1),
            "replicas": args.replicas, "device": _device(args.device), "samples": 5 if args.smoke else 50}
    return child.run_one("multidev.bench.memory_growth", spec, args.timeout)


def _scaling(args) -> dict:
    spec = {"replicas": args.counts or ([1, 2] if args.smoke else [1, 2, 4, 8]), "steps": args.steps or (3 if args.smoke else 30),
            "rounds": args.rounds or (1 if args.smoke else 3), "warmup": args.warmup or (1 if args.smoke else 5),
            "device": _device(args.device), "threads": args.threads}
    return scaling.run(spec, args.timeout, progress=_say)


def collect(args) -> dict:
    """Run the chosen suite(s) and gather one report dict."""
    from multidev.bench import measure

    out: dict = {"command": "multidev bench " + " ".join(shlex.quote(a) for a in sys.argv[2:])
                 if sys.argv[1:2] == ["bench"] else "python -m multidev.bench " + " ".join(map(shlex.quote, sys.argv[1:]))}
    targets: list = []
    if args.suite in ("train", "all"):
        out["train"] = _train(args)
        targets += report.train_targets(out["train"]["results"], out["train"]["spec"]["device"])
    if args.suite in ("collectives", "all"):
        out["collectives"] = _collectives(args)
        targets += report.collective_targets(out["collectives"]["rows"])
    if args.suite in ("memory", "all"):
        out["memory"] = _memory(args)
    if args.suite == "scaling":  # not part of "all": 3 methods x 4 counts of fresh processes
        out["scaling"] = _scaling(args)
    out["targets"] = targets
    out["machine"] = measure.machine()  # load average at the end of the run
    if args.threads:
        out["machine"]["torch_threads"] = args.threads  # what the in-process children used
    out["smoke"] = bool(args.smoke)
    return out


def run(args) -> int:
    """Run ``multidev bench``; prints the tables (or JSON with ``--json``)."""
    try:
        result = collect(args)
    except child.BenchChildError as err:
        print(f"multidev bench: {err}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1) if args.json else report.render(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m multidev.bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
