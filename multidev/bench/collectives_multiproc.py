"""Worker process of the cross-process collectives benchmark: multidev's ``ProcessCollective``
(what MultiWorkerMirroredStrategy uses) vs raw ``torch.distributed.all_reduce`` on the same Gloo
processes and buffers, sizes alternating between the two in every round.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

from multidev.bench import measure
from multidev.bench.collectives_inprocess import repeat_count


def _timed(fn, k: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(k):
        fn()
    return time.perf_counter() - start


def _agreed(value: float) -> float:
    """The largest of every rank's ``value`` (all ranks then use the same repeat count)."""
    t = torch.tensor([value])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def main(spec: dict) -> dict:
    from multidev.collectives.process import ProcessCollective
    from multidev.distribute.cluster_resolver import TFConfigClusterResolver, collective_world

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    collective = ProcessCollective(collective_world(TFConfigClusterResolver()))
    rows = []
    for size in spec["sizes"]:
        buf = torch.ones(max(1, size // 4))
        calls = {"process_collective": lambda: collective.all_reduce(buf), "torch_distributed": lambda: dist.all_reduce(buf)}
        counts = {k: repeat_count(_agreed(_timed(fn, 1)), spec["target_s"]) for k, fn in calls.items()}
        samples: dict[str, list[float]] = {k: [] for k in calls}
        for r in range(spec["rounds"]):
            for key in measure.rotated(list(calls), r):
                samples[key].append(_timed(calls[key], counts[key]) / counts[key])
        rows += [{"path": k, "replicas": world, "bytes": size, "seconds": measure.summarize(v)} for k, v in samples.items()]
    collective.shutdown()
    dist.barrier()
    dist.destroy_process_group()
    return {"machine": measure.machine(), "rows": rows}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit_and_leave

    emit_and_leave(main(json.loads(sys.argv[1])), int(os.environ["RANK"]))
