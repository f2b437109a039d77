"""Turning benchmark results into tables (Markdown-compatible) and target verdicts."""

from __future__ import annotations

import statistics
from typing import Any

#: (name, variant, reference variant, bound): step-time ratios of issue 8, per workload.
TRAIN_TARGETS = (
    ("MirroredStrategy 1 device, custom loop <= 1.03x plain", "mirrored_1", "plain", 1.03),
    ("MirroredStrategy 1 device, fit <= 1.08x plain", "fit_mirrored_1", "plain", 1.08),
    ("MirroredStrategy 2 logical devices <= 1.15x plain (same global batch)", "mirrored_2", "plain", 1.15),
    ("MultiWorkerMirroredStrategy 2 processes <= 1.10x DDP", "mwms_2proc", "ddp_2proc", 1.10),
    ("Keras 3 fit, MirroredStrategy 1 device <= 1.05x Keras 3's own fit", "keras3_fit1", "keras3_own", 1.05),
    ("Keras 3 fit, MirroredStrategy 2 logical devices <= 1.15x plain (same global batch)", "keras3_fit2", "plain", 1.15),
)
#: Targets of the GPU check (issue 28), read only from a run on GPUs: custom loop and fit on one device,
#: two logical GPUs on one physical GPU (>= 0.95x the throughput of one: <= 1/0.95 the step time at the
#: same global batch), bf16 autocast (>= 1.5x faster: <= 1/1.5 the step time).
GPU_TRAIN_TARGETS = (
    ("GPU: MirroredStrategy 1 device, custom loop <= 1.02x plain", "mirrored_1", "plain", 1.02),
    ("GPU: MirroredStrategy 1 device, fit <= 1.05x plain", "fit_mirrored_1", "plain", 1.05),
    ("GPU: 2 logical GPUs on one GPU >= 0.95x the throughput of 1", "mirrored_2", "mirrored_1", 1 / 0.95),
    ("GPU: bf16 autocast >= 1.5x faster than fp32", "plain_bf16", "plain", 1 / 1.5),
    ("GPU: Keras 3 fit on 2 logical GPUs vs Keras 3 fit on 1 (>= 0.95x throughput)", "keras3_fit2", "keras3_fit1", 1 / 0.95),
)
COLLECTIVE_TARGET = 0.8  # in-process all-reduce busbw of >= 16 MB buffers vs memory-copy bandwidth
COLLECTIVE_TARGET_BYTES = 16 * 2**20


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def machine_line(machine: dict) -> str:
    load = ", ".join(f"{x:.2f}" for x in machine.get("load_average", []))
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ""
    return (f"{machine.get('nproc')} CPUs ({machine.get('cpu_model')}), torch {machine.get('torch')}, "
            f"{machine.get('torch_threads')} intra-op threads, load average {load}{gpu}")


def train_table(results: dict) -> str:
    """One row per workload and variant: ms/step (median, spread), examples/s, ratio to plain (median
    of per-round ratios), CPU ms/step and its ratio, peak memory."""
    lines = ["| workload | variant | ms/step (median) | spread | examples/s | ratio to plain | CPU ms/step | "
             "CPU ratio | peak MiB |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for workload, variants in results.items():
        plain = variants.get("plain", {})
        for name, r in variants.items():
            med = r["step_s"]["median"]
            cpu = r.get("cpu_s", {}).get("median")
            ratio = paired_ratio(r, plain) if plain else None
            cpu_ratio = paired_ratio(r, plain, "cpu_s") if plain else None
            lines.append(f"| {workload} | {name} | {med * 1e3:.2f} | {r['step_s']['spread'] * 100:.0f}% | "
                         f"{r['batch_size'] / med:.0f} | {_fmt(ratio, '.3f')} | {_fmt(cpu and cpu * 1e3, '.2f')} | "
                         f"{_fmt(cpu_ratio, '.3f')} | {_fmt(r.get('peak_mb'), '.0f')} |")
    return "\n".join(lines)


def paired_ratio(variant: dict, reference: dict, key: str = "step_s") -> float | None:
    """Median over rounds of (variant / reference) in the same round: the two ran minutes apart at
    most, so a round-wide slowdown of the machine cancels out (better than a ratio of medians)."""
    a, b = variant.get(key, {}).get("samples", []), reference.get(key, {}).get("samples", [])
    pairs = [x / y for x, y in zip(a, b) if y]
    return statistics.median(pairs) if pairs and len(a) == len(b) else None


def train_targets(results: dict, device: str = "cpu") -> list[dict]:
    """Each target of issue 8 (and, on GPUs, of the GPU check) per workload where both variants ran:
    ratio and whether it holds."""
    out = []
    targets = TRAIN_TARGETS + (GPU_TRAIN_TARGETS if device == "gpu" else ())
    for workload, variants in results.items():
        for name, variant, reference, bound in targets:
            if variant in variants and reference in variants:
                v, ref = variants[variant], variants[reference]
                ratio = paired_ratio(v, ref) or v["step_s"]["median"] / ref["step_s"]["median"]
                out.append({"workload": workload, "target": name, "ratio": ratio, "bound": bound, "holds": ratio <= bound,
                            "cpu_ratio": paired_ratio(v, ref, "cpu_s")})
    return out


def targets_table(targets: list[dict]) -> str:
    lines = ["| workload | target | measured (wall) | holds | CPU-time ratio |", "|---|---|---:|---|---:|"]
    lines += [f"| {t['workload']} | {t['target']} | {t['ratio']:.3f}x | {'yes' if t['holds'] else 'NO'} | "
              f"{_fmt(t.get('cpu_ratio'), '.3f')} |" for t in targets]
    return "\n".join(lines)


def _size(nbytes: int) -> str:
    for unit, scale in (("MB", 2**20), ("KB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


IN_PROCESS_PATHS = ("replica_context", "gradient_buckets", "extended")
SHARED_RESULT_PATHS = ("extended",)  # one result tensor every replica reads; the others write one per replica


def shared_memory_bound(n: int, results: int) -> float:
    """The most busbw / memory-copy bandwidth an all-reduce of ``n`` buffers in one memory can reach
    once they leave the caches: it reads all n buffers and writes ``results`` of them ((n + results)
    S bytes of traffic) where a copy of S bytes moves 2S, and busbw = (S / t) 2(n-1)/n. With a result
    per replica that is 2(n-1)/n^2: 0.5 for 2 replicas, 0.375 for 4."""
    return 2 * (n - 1) / n * 2 / (n + results)


def collective_rows(rows: list[dict], memcpy_bps: float | None) -> list[dict]:
    """Add algbw (bytes / time), busbw (algbw x 2(n-1)/n), busbw / memory-copy bandwidth and, for
    in-process paths, the shared-memory bound of that ratio."""
    out = []
    for row in rows:
        t, n = row["seconds"]["median"], row["replicas"]
        algbw = row["bytes"] / t
        busbw = algbw * 2 * (n - 1) / n
        results = 1 if row["path"] in SHARED_RESULT_PATHS else n
        bound = shared_memory_bound(n, results) if row["path"] in IN_PROCESS_PATHS else None
        out.append({**row, "algbw": algbw, "busbw": busbw, "vs_memcpy": busbw / memcpy_bps if memcpy_bps else None,
                    "memory_bound": bound})
    return out


def collectives_table(rows: list[dict]) -> str:
    lines = ["| path | n | size | time (median) | spread | algbw GB/s | busbw GB/s | busbw / memcpy | "
             "shared-memory bound |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["seconds"]["median"]
        lines.append(f"| {r['path']} | {r['replicas']} | {_size(r['bytes'])} | {t * 1e6:.0f} us | "
                     f"{r['seconds']['spread'] * 100:.0f}% | {r['algbw'] / 1e9:.3f} | {r['busbw'] / 1e9:.3f} | "
                     f"{_fmt(r['vs_memcpy'], '.2f')} | {_fmt(r.get('memory_bound'), '.3f')} |")
    return "\n".join(lines)


def collective_targets(rows: list[dict]) -> list[dict]:
    """The in-process target: busbw of >= 16 MB all-reduces at least 0.8x memory-copy bandwidth."""
    out = []
    for r in rows:
        if r["path"] in IN_PROCESS_PATHS and r["bytes"] >= COLLECTIVE_TARGET_BYTES \
                and r["vs_memcpy"]:
            out.append({"workload": f"{r['path']} n={r['replicas']} {_size(r['bytes'])}",
                        "target": f"in-process all-reduce busbw >= {COLLECTIVE_TARGET}x memcpy "
                                  f"(shared-memory bound {r['memory_bound']:.3f}x)",
                        "ratio": r["vs_memcpy"], "bound": COLLECTIVE_TARGET, "holds": r["vs_memcpy"] >= COLLECTIVE_TARGET})
    return out


def memory_summary(result: dict, bound_mb_per_1000: float = 1.0) -> str:
    """One paragraph: run length, samples' range, slope and the verdict."""
    mbs = [mb for _, mb in result["samples"]]
    flat = abs(result["slope_mb_per_1000_steps"]) <= bound_mb_per_1000
    verdict = ("too short to judge" if result["steps"] - result["warmup"] < 1000
               else "flat" if flat else "GROWING")
    return (f"{result['workload']} on MirroredStrategy with {result['replicas']} replicas, {result['steps']} steps "
            f"({result['seconds']:.0f} s), {result['kind']} sampled {len(mbs)} times after {result['warmup']} warm-up "
            f"steps: {min(mbs):.1f}..{max(mbs):.1f} MiB, slope {result['slope_mb_per_1000_steps']:+.3f} MiB per 1,000 "
            f"steps, first-to-last {result['growth_mb']:+.1f} MiB -> "
            f"{verdict} (bound {bound_mb_per_1000} MiB per 1,000 steps)")


def render(report: dict[str, Any]) -> str:
    """The whole human-readable report of one ``multidev bench`` run."""
    parts = [f"machine: {machine_line(report['machine'])}", f"command: {report['command']}"]
    if "train" in report:
        parts += ["", "## Training step time", "", train_table(report["train"]["results"])]
        parts += [f"note: {n}" for n in report["train"].get("notes", [])]
    if "collectives" in report:
        c = report["collectives"]
        memcpy = c.get("memcpy")
        parts += ["", "## All-reduce", ""]
        if memcpy:
            parts.append(f"memory-copy bandwidth (Tensor.copy_ of {_size(memcpy['bytes'])}): "
                         f"{memcpy['bytes_per_s'] / 1e9:.3f} GB/s")
            parts.append("")
        parts.append(collectives_table(c["rows"]))
    if "memory" in report:
        parts += ["", "## Memory growth", "", memory_summary(report["memory"])]
    if "scaling" in report:
        from multidev.bench.scaling import table

        parts += ["", "## Scaling of per-step Python cost (step time at N replicas / at 1; weak scaling, batch 2 per replica)",
                  "", table(report["scaling"])]
    if report.get("targets"):
        parts += ["", "## Targets", "", targets_table(report["targets"])]
    return "\n".join(parts)
