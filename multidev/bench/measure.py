"""Measuring: wall time of a batch of steps, process memory (RSS) and GPU memory, summary statistics.

RSS comes from ``/proc/self/status`` (``VmRSS`` now, ``VmHWM`` the peak); writing ``5`` to
``/proc/self/clear_refs`` resets the peak, so each variant's peak is measured on its own steps.
On GPUs the peak is ``torch.cuda.max_memory_allocated`` (reset per variant).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

import torch


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float | None:
    """Resident set size of this process now, in MiB (None where /proc is missing)."""
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024


def peak_rss_mb() -> float | None:
    """Peak resident set size since the last ``reset_peak``, in MiB."""
    kb = _status_kb("VmHWM")
    return None if kb is None else kb / 1024


def reset_peak(device: torch.device | None = None) -> None:
    """Start a new peak-memory window (RSS, and the GPU allocator's peak on ``device``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    if device is not None and device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device | None = None) -> float | None:
    """The peak of the current window: GPU allocated memory on a CUDA device, RSS otherwise."""
    if device is not None and device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return peak_rss_mb()


def synchronize(device: torch.device | None) -> None:
    """Wait for queued GPU work so a wall-clock reading includes it (no-op on CPU)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Wall-clock and process CPU seconds of a block (``with Stopwatch(device) as sw: ...``).

    CPU time (``time.process_time``: every thread of this process) barely moves when other
    processes compete for the cores, so on a noisy machine it shows a variant's own cost where
    wall time mostly shows the neighbours; wall time is what the targets are stated in."""

    def __init__(self, device: torch.device | None = None):
        self.device = device
        self.wall = self.cpu = 0.0

    def __enter__(self) -> "Stopwatch":
        synchronize(self.device)
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.wall, self.cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu

    def per(self, count: int) -> tuple[float, float]:
        """(wall, cpu) seconds per one of ``count`` steps."""
        return self.wall / count, self.cpu / count


def time_steps(step: Callable, batches: Sequence, device: torch.device | None = None) -> tuple[float, float]:
    """(wall, cpu) seconds per step of ``step(x, y)`` over ``batches``."""
    with Stopwatch(device) as sw:
        for x, y in batches:
            step(x, y)
    return sw.per(len(batches))


def summarize(samples: Sequence[float]) -> dict:
    """Median, min, max and relative spread ((max - min) / median) of per-round samples."""
    med = statistics.median(samples)
    return {"median": med, "min": min(samples), "max": max(samples),
            "spread": (max(samples) - min(samples)) / med if med else 0.0, "samples": list(samples)}


def rotated(items: Sequence, round_index: int) -> list:
    """``items`` rotated by ``round_index``: each variant takes each position in turn, so slow drift
    of the machine (thermal, other jobs) spreads evenly over the variants."""
    k = round_index % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs`` (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def machine() -> dict:
    """What the numbers were measured on: CPUs, CPU model, torch, threads, load average, GPU."""
    import os
    import platform

    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    info = {"nproc": os.cpu_count(), "cpu_model": model, "torch": torch.__version__, "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(), "load_average": list(os.getloadavg())}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def fit_epoch_runner(model, batch_size: int, device: torch.device):
    """``run(batches)``: one epoch of ``model.fit`` (md.keras or Keras 3) over ``batches``, concatenated
    once and not shuffled; returns the per-step wall and CPU times."""
    cache: dict = {}

    def run(batches):
        key = id(batches)
        if key not in cache:
            cache.clear()
            cache[key] = (torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
        x, y = cache[key]
        with Stopwatch(device) as sw:
            model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
        return sw.per(len(batches))

    return run
