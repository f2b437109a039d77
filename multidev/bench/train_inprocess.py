"""Child process of the training benchmark: configures the logical devices once, builds every
requested in-process variant of each workload, and times them in alternating rounds.

    python -m multidev.bench.train_inprocess '{"workloads": ["text_conv"], "variants": [...], ...}'
"""

from __future__ import annotations

import gc
import sys
from typing import Sequence

import torch

from multidev.bench import measure, variants
from multidev.bench.child import progress
from multidev.bench.workloads import get as get_workload


def configure_devices(count: int, device_type: str) -> tuple[list[str], torch.device]:
    """Split the first CPU (or GPU) into ``count`` logical devices; their names and the first's torch device.

    Logical GPUs each get an equal share of the GPU's memory (TensorFlow requires a limit)."""
    import multidev as md

    kind = device_type.upper()
    physical = md.config.list_physical_devices(kind)
    if not physical:
        raise RuntimeError(f"No {kind} device on this machine; run the benchmark with --device cpu.")
    if kind == "GPU":
        total_mb = torch.cuda.get_device_properties(0).total_memory // 2**20
        limit = int(total_mb * 0.9 / count)
        configs = [md.config.LogicalDeviceConfiguration(memory_limit=limit) for _ in range(count)]
    else:
        configs = [md.config.LogicalDeviceConfiguration() for _ in range(count)]
    md.config.set_logical_device_configuration(physical[0], configs)
    logical = md.config.list_logical_devices(kind)
    names = [f"/{kind.lower()}:{i}" for i in range(len(logical))]
    return names, torch.device("cuda:0" if kind == "GPU" else "cpu")


def time_workload(workload_name: str, names: Sequence[str], device: torch.device, spec: dict) -> dict:
    """Median seconds per step and peak memory of each variant, rounds alternating the variants."""
    workload = get_workload(workload_name)
    batches = [(x.to(device), y.to(device)) for x, y in workload.batches(spec["steps"])]
    warm = batches[: max(1, spec["warmup"])]
    built = [variants.build(v, workload, names, device) for v in spec["variants"] if variants.available(v, workload_name)]
    for variant in built:
        variant.run(list(warm))
    times: dict[str, list[float]] = {v.name: [] for v in built}
    cpu: dict[str, list[float]] = {v.name: [] for v in built}
    peaks: dict[str, float] = {}
    for r in range(spec["rounds"]):
        for variant in measure.rotated(built, r):
            measure.reset_peak(device)
            wall, cpu_s = variant.run(batches)
            times[variant.name].append(wall)
            cpu[variant.name].append(cpu_s)
            progress(f"{workload_name} round {r + 1}/{spec['rounds']}: {variant.name} {wall * 1e3:.2f} ms/step")
            peak = measure.peak_memory_mb(device)
            if peak is not None:
                peaks[variant.name] = max(peaks.get(variant.name, 0.0), peak)
    del built
    gc.collect()
    return {name: {"step_s": measure.summarize(ts), "cpu_s": measure.summarize(cpu[name]), "peak_mb": peaks.get(name),
                   "batch_size": workload.batch_size} for name, ts in times.items()}


def main(spec: dict) -> dict:
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    needed = max([variants.devices_needed(v) for v in spec["variants"]] + [1])
    names, device = configure_devices(max(needed, spec.get("logical_devices", needed)), spec["device"])
    results = {w: time_workload(w, names, device, spec) for w in spec["workloads"]}
    return {"machine": measure.machine(), "results": results}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit

    emit(main(json.loads(sys.argv[1])))
