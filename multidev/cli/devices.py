"""``multidev devices``: a table (or ``--json``) of the physical and logical devices.

Options split the CPU (``--logical-cpus N``) or each GPU (``--logical-gpus N --memory-limit MB``)
into logical devices first, to show what a multi-device program on this machine would see.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import multidev as md
from multidev.devices import registry

HELP = "list physical and logical devices (table or --json)"
_MB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this command's options to its parser."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--logical-cpus", type=int, metavar="N", help="split the CPU into N logical CPUs")
    parser.add_argument("--logical-gpus", type=int, metavar="N", help="split each GPU into N logical GPUs")
    parser.add_argument(
        "--memory-limit", type=int, metavar="MB", help="memory limit of each logical GPU (with --logical-gpus)"
    )


def _host_memory_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gpu_memory(index: int) -> tuple[int | None, int | None]:
    """(total, used) bytes of a physical GPU as the CUDA driver reports them."""
    import torch

    free, total = torch.cuda.mem_get_info(index)
    return total, total - free


def _configure(args: argparse.Namespace) -> str | None:
    """Apply the splitting options; return an error message for bad ones."""
    if args.logical_cpus is not None:
        if args.logical_cpus < 1:
            return f"--logical-cpus must be >= 1, got {args.logical_cpus!r}"
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * args.logical_cpus)
    if args.logical_gpus is None:
        return "--memory-limit needs --logical-gpus" if args.memory_limit is not None else None
    gpus = md.config.list_physical_devices("GPU")
    if args.logical_gpus < 1 or args.memory_limit is None or args.memory_limit < 1:
        return "--logical-gpus N needs N >= 1 and --memory-limit MB with MB >= 1"
    if not gpus:
        return "--logical-gpus: this machine has no GPU (md.config.list_physical_devices('GPU') is empty)"
    config = md.config.LogicalDeviceConfiguration(memory_limit=args.memory_limit)
    for gpu in gpus:
        md.config.set_logical_device_configuration(gpu, [config] * args.logical_gpus)
    return None


def _physical_rows() -> list[dict]:
    visible = md.config.get_visible_devices()
    rows = []
    for dev in md.config.list_physical_devices():
        index = int(dev.name.rsplit(":", 1)[1])
        total, used = (_host_memory_total(), None) if dev.device_type == "CPU" else _gpu_memory(index)
        rows.append(
            {
                "kind": "physical",
                "name": dev.name,
                "type": dev.device_type,
                "torch_device": "cpu" if dev.device_type == "CPU" else f"cuda:{index}",
                "memory_total": total,
                "memory_used": used,
                "visible": dev in visible,
            }
        )
    return rows


def _logical_rows() -> list[dict]:
    rows = []
    for dev in registry.logical_devices():
        used = md.config.experimental.get_memory_info(dev.name)["current"] if dev.device_type == "GPU" else None
        rows.append(
            {
                "kind": "logical",
                "name": dev.name,
                "type": dev.device_type,
                "torch_device": str(dev.torch_device),
                "memory_total": dev.memory_limit,
                "memory_used": used,
                "visible": True,
            }
        )
    return rows


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / _MB:,.0f} MB"


def _table(rows: list[dict]) -> str:
    header = ("KIND", "NAME", "TYPE", "TORCH", "MEMORY TOTAL", "MEMORY USED", "VISIBLE")
    cells = [header] + [
        (r["kind"], r["name"], r["type"], r["torch_device"], _mb(r["memory_total"]), _mb(r["memory_used"]),
         "yes" if r["visible"] else "no")
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def run(args: argparse.Namespace) -> int:
    """Print the devices; return 0, or 2 for bad options."""
    try:
        error = _configure(args)
    except (ValueError, TypeError, RuntimeError) as exc:
        error = str(exc)
    if error:
        print(f"multidev devices: error: {error}", file=sys.stderr)
        return 2
    rows = _physical_rows() + _logical_rows()
    if args.json:
        print(json.dumps({"physical": [r for r in rows if r["kind"] == "physical"],
                          "logical": [r for r in rows if r["kind"] == "logical"]}, indent=2))
    else:
        print(_table(rows))
        hint = _split_hint(rows)
        if hint:
            print("\n" + hint)
    return 0


def _split_hint(rows: list[dict]) -> str | None:
    """How to get several replicas where ``MirroredStrategy()`` would find one device (no GPU, one CPU)."""
    logical = [r for r in rows if r["kind"] == "logical"]
    if any(r["type"] == "GPU" for r in logical) or len(logical) > 1:
        return None
    return ("MirroredStrategy() uses every GPU, else the CPU: 1 replica on this machine. To run N replicas on the CPU,\n"
            "split it into logical devices before first use:\n"
            "  in the program:  cpu = md.config.list_physical_devices('CPU')[0]\n"
            "                   md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)\n"
            "  or from outside: MULTIDEV_LOGICAL_CPUS=2 python train.py\n"
            "  preview:         multidev devices --logical-cpus 2")


__all__ = ["HELP", "add_arguments", "run"]
