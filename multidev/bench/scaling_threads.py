"""Child of ``multidev bench scaling``: step time of the probe (``scaling_model``) under
``MirroredStrategy`` on N = 1, 2, 4, 8 logical devices of one process (one thread per replica).

    python -m multidev.bench.scaling_threads '{"replicas": [1, 2, 4, 8], "steps": 30, ...}'
"""

from __future__ import annotations

import sys

import torch

from multidev.bench import measure, scaling_model
from multidev.bench.train_inprocess import configure_devices


def _mirrored_runner(n: int, names: list[str], device: torch.device):
    import multidev as md

    strategy = md.distribute.MirroredStrategy(names[:n])
    with strategy.scope():
        net = scaling_model.model()
        opt = scaling_model.optimizer(net.parameters())
    step = scaling_model.train_step(net, opt)

    def run(global_batches):
        def one(x, y):
            parts = (md.distribute.PerReplica(torch.tensor_split(x, n)), md.distribute.PerReplica(torch.tensor_split(y, n))) \
                if n > 1 else (x, y)
            strategy.run(step, args=parts)

        return measure.time_steps(one, global_batches, device)

    return run


def main(spec: dict) -> dict:
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    counts = spec["replicas"]
    names, device = configure_devices(max(counts), spec["device"])
    runners = {n: _mirrored_runner(n, names, device) for n in counts}
    data = {n: scaling_model.batches(spec["steps"], scaling_model.PER_REPLICA_BATCH * n, device) for n in counts}
    for n, run in runners.items():
        run(data[n][: max(1, spec["warmup"])])
    times: dict[int, list[float]] = {n: [] for n in counts}
    for r in range(spec["rounds"]):
        for n in measure.rotated(counts, r):
            times[n].append(runners[n](data[n])[0])
    return {"machine": measure.machine(), "step_s": {str(n): measure.summarize(t) for n, t in times.items()}}


if __name__ == "__main__":
    import json

    from multidev.bench.child import emit

    emit(main(json.loads(sys.argv[1])))
