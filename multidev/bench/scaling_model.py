"""The Python-bound scaling probe's workload: a tiny 16-layer MLP at batch 2 per replica, trained by a
plain PyTorch custom loop (``torch.optim.SGD``, mean loss, ``loss.backward()``, ``opt.step()``).

Each step does almost no arithmetic, so its time is the per-layer Python (module calls, hooks, the
optimizer's loop) and the synchronisation between replicas: exactly what one-thread-per-replica
``MirroredStrategy`` serialises on the GIL and one-process-per-replica training does not.
"""

from __future__ import annotations

import torch
from torch import nn

LAYERS, WIDTH, PER_REPLICA_BATCH = 16, 32, 2


def model() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers)


def optimizer(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.01)


def batches(count: int, global_batch: int, device: torch.device | str = "cpu") -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` seeded global batches of ``global_batch`` rows."""
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(global_batch, WIDTH, generator=g).to(device), torch.randn(global_batch, WIDTH, generator=g).to(device))
            for _ in range(count)]


def train_step(net: nn.Module, opt: torch.optim.Optimizer):
    """The plain PyTorch step every method runs (on its replica's or rank's part of the batch)."""
    loss_fn = nn.MSELoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    return step
