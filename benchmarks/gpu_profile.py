"""Where a variant's step time goes on a GPU (or CPU): ``torch.profiler`` over a few steps of one
in-process variant, the top operators by self device time, and the count of host-device syncs.

Run by ``benchmarks/gpu_check.sh`` to say why a missed GPU target was missed. CUDA kernels of every
replica thread are recorded; on CPU the profiler records only the calling thread's operators.


    python benchmarks/gpu_profile.py --device gpu --workload transformer --variant mirrored_2 [--steps 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed copy

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from multidev.bench import variants, workloads  # noqa: E402
from multidev.bench.train_inprocess import configure_devices  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    parser.add_argument("--workload", default="transformer", choices=sorted(workloads.WORKLOADS))
    parser.add_argument("--variant", action="append", choices=variants.INPROCESS_VARIANTS,
                        help="repeatable (default: plain and mirrored_2)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    names, device = configure_devices(2, args.device)
    w = workloads.get(args.workload)
    batches = [(x.to(device), y.to(device)) for x, y in w.batches(args.steps)]
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for name in args.variant or ["plain", "mirrored_2"]:
        built = variants.build(name, w, names, device)
        built.run(batches[:2])  # warm-up
        with profile(activities=activities) as prof:
            seconds, _ = built.run(batches)
        key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        print(f"## {args.workload} / {name}: {seconds * 1e3:.2f} ms/step over {args.steps} steps ({device})")
        print(prof.key_averages().table(sort_by=key, row_limit=args.top))
        syncs = [e for e in prof.key_averages() if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                               "aten::item", "aten::_local_scalar_dense")]
        print("host-device syncs: " + (", ".join(f"{e.key} x{e.count}" for e in syncs) or "none seen"))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
