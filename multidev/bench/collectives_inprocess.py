"""Child process of the collectives benchmark: in-process all-reduce across 2 and 4 replicas of a
``MirroredStrategy`` on logical CPUs (or GPUs), through the replica context inside ``strategy.run``
through the in-place path gradient buckets use (``gradient_buckets``), and through
``strategy.extended.all_reduce_tensors`` from cross-replica context, next to the
machine's memory-copy bandwidth (``Tensor.copy_`` of a large buffer).

    python -m multidev.bench.collectives_inprocess '{"sizes": [1024, ...], "replicas": [2, 4], ...}'
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable

import torch

from multidev.bench import measure


def repeat_count(once_s: float, target_s: float, most: int = 200) -> int:
    """How many calls fill about ``target_s`` seconds, given one call took ``once_s``."""
    return max(2, min(most, int(target_s / max(once_s, 1e-7))))


def seconds_per_call(call: Callable[[int], float], target_s: float, rounds: int) -> list[float]:
    """``call(k)`` runs k calls and returns their total seconds; per-call seconds of each round."""
    k = repeat_count(call(1), target_s)
    return [call(k) / k for _ in range(rounds)]


def memcpy_bandwidth(nbytes: int, device: torch.device, rounds: int = 5) -> float:
    """Bytes copied per second by ``dst.copy_(src)`` of an ``nbytes`` float32 buffer."""
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)

    def call(k: int) -> float:
        measure.synchronize(device)
        start = time.perf_counter()
        for _ in range(k):
            dst.copy_(src)
        measure.synchronize(device)
        return time.perf_counter() - start

    return nbytes / statistics.median(seconds_per_call(call, 0.3, rounds))


def _in_replica_call(strategy, buffers, method: str) -> Callable[[int], float]:
    """Time ``k`` calls of ``ReplicaContext.<method>(SUM, buffer)`` inside ``strategy.run``."""
    import multidev as md

    def replica_fn(buf, k):
        reduce = getattr(md.distribute.get_replica_context(), method)
        start = time.perf_counter()
        for _ in range(k):
            reduce(md.distribute.ReduceOp.SUM, buf)
        return torch.tensor(time.perf_counter() - start)

    def call(k: int) -> float:
        out = strategy.run(replica_fn, args=(md.distribute.PerReplica(buffers), k))
        return max(float(t) for t in strategy.experimental_local_results(out))

    return call


def _replica_context_call(strategy, buffers) -> Callable[[int], float]:
    return _in_replica_call(strategy, buffers, "all_reduce")


def _owned_call(strategy, buffers) -> Callable[[int], float]:
    """The gradient-bucket path: each replica reduces a buffer it owns, in place, cooperatively."""
    return _in_replica_call(strategy, [torch.zeros_like(b) for b in buffers], "_all_reduce_owned")


def _extended_call(strategy, buffers) -> Callable[[int], float]:
    from multidev._core.enums import ReduceOp

    device = buffers[0].device

    def call(k: int) -> float:
        measure.synchronize(device)
        start = time.perf_counter()
        for _ in range(k):
            strategy.extended.all_reduce_tensors(ReduceOp.SUM, buffers, private=False)
        measure.synchronize(device)
        return time.perf_counter() - start

    return call


def main(spec: dict) -> dict:
    import multidev as md
    from multidev.bench.train_inprocess import configure_devices

    names, device = configure_devices(max(spec["replicas"]), spec["device"])
    rows = []
    for n in spec["replicas"]:
        strategy = md.distribute.MirroredStrategy(names[:n])
        devices = strategy.extended.torch_devices
        for size in spec["sizes"]:
            buffers = [torch.ones(max(1, size // 4), device=d) for d in devices]
            for path, make in (("replica_context", _replica_context_call), ("gradient_buckets", _owned_call),
                               ("extended", _extended_call)):
                per_call = seconds_per_call(make(strategy, buffers), spec["target_s"], spec["rounds"])
                rows.append({"path": path, "replicas": n, "bytes": size, "seconds": measure.summarize(per_call)})
            del buffers
    copy_bytes = max(spec["sizes"] + [spec.get("memcpy_bytes", 0)])
    return {"machine": measure.machine(), "rows": rows,
            "memcpy": {"bytes": copy_bytes, "bytes_per_s": memcpy_bandwidth(copy_bytes, device)}}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit

    emit(main(json.loads(sys.argv[1])))
