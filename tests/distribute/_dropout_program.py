"""A small dropout model trained 3 steps as a DDP program (``RANK PORT OUT``: one Gloo rank; rank 0 writes
the final weights to OUT), then, by rank 0, on multidev's MirroredStrategy with 2 logical CPUs (to
OUT.multidev): float64, as text. Used by ``test_replica_random.py`` to check that replica r draws as DDP
rank r does (one interpreter fewer than a separate multidev run)."""

from __future__ import annotations

import os
import sys

import torch

FEATURES, BATCH, STEPS = 8, 6, 3   # BATCH: the global batch, 3 examples per replica / rank


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16, dtype=torch.float64), torch.nn.ReLU(),
                               torch.nn.Dropout(0.5), torch.nn.Linear(16, 4, dtype=torch.float64))


def _data():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, FEATURES, dtype=torch.float64, generator=g),
             torch.randn(BATCH, 4, dtype=torch.float64, generator=g)) for _ in range(STEPS)]


def _per_example_loss(model, x, y):
    # randn_like draws too: a noisy target, as in denoising programs
    return ((model(x) - (y + 0.1 * torch.randn_like(y))) ** 2).mean(dim=1)


def _write(model, out: str) -> None:
    with open(out, "w") as f:
        for p in model.parameters():
            f.write(" ".join(repr(float(v)) for v in p.detach().flatten()) + "\n")


def ddp(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    model = _model()
    wrapped = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    half = BATCH // 2
    for x, y in _data():
        optimizer.zero_grad()
        _per_example_loss(wrapped, x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]).mean().backward()
        optimizer.step()
    if rank == 0:
        _write(model, out)
    dist.destroy_process_group()


def multidev(out: str) -> None:
    import multidev as md

    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    strategy = md.distribute.MirroredStrategy()
    with strategy.scope():
        model = _model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        optimizer.zero_grad()
        md.nn.compute_average_loss(_per_example_loss(model, x, y), global_batch_size=BATCH).backward()
        optimizer.step()

    data = _data()
    dataset = md.data.Dataset.from_tensor_slices((torch.cat([x for x, _ in data]),
                                                  torch.cat([y for _, y in data]))).batch(BATCH)
    for x, y in strategy.experimental_distribute_dataset(dataset):
        strategy.run(step, args=(x, y))
    _write(model, out)


if __name__ == "__main__":
    rank, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ddp(rank, port, out)
    if rank == 0:
        multidev(out + ".multidev")
    # The results are written; leave without C++ static destructors: torch's Gloo/TCPStore threads,
    # left over from the destroyed process group, once aborted this interpreter at exit on a loaded
    # machine ("terminate called without an active exception"), failing a run whose results were right.
    sys.stdout.flush()
    os._exit(0)
