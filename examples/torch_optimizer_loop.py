"""A plain PyTorch training loop on MirroredStrategy: any torch.nn.Module, any torch.optim optimizer.

Two replicas (logical CPUs here, GPUs where there are some) each take half of every global batch;
``loss.backward()`` sums their gradients (the loss went through ``md.nn.compute_average_loss``; a plain
torch mean loss would be averaged, as DDP does), ``optimizer.step()`` updates every copy, so the run
equals one device on the same global batches. The optimizer, its LR scheduler, ``state_dict()`` and
``load_state_dict`` are torch's own, unchanged.

    python examples/torch_optimizer_loop.py
"""

from __future__ import annotations

import contextlib

import torch

import multidev as md

GLOBAL_BATCH = 64


def make_data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, :4].sum(1) > x[:, 4:].sum(1)).long()   # a separable two-class problem
    return x, y


def train(strategy: md.distribute.Strategy | None, epochs: int = 3) -> tuple[torch.nn.Module, list[float]]:
    torch.manual_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.5)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")
    x, y = make_data()
    dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)

    def step(xb, yb):
        optimizer.zero_grad()
        loss = md.nn.compute_average_loss(loss_fn(model(xb), yb), global_batch_size=GLOBAL_BATCH)
        loss.backward()
        optimizer.step()
        return loss

    losses = []
    for _ in range(epochs):
        batches = strategy.experimental_distribute_dataset(dataset) if strategy else dataset
        for xb, yb in batches:
            per_replica = strategy.run(step, args=(xb, yb)) if strategy else step(xb, yb)
            loss = strategy.reduce("SUM", per_replica, axis=None) if strategy else per_replica
            losses.append(float(loss.detach()))
            scheduler.step()
    return model, losses


def main() -> None:
    cpu = md.config.list_physical_devices("CPU")[0]
    if not md.config.list_physical_devices("GPU"):
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    strategy = md.distribute.MirroredStrategy()
    print(f"replicas: {strategy.num_replicas_in_sync}")
    model, losses = train(strategy)
    reference, reference_losses = train(None)
    print(f"loss: first {losses[0]:.4f}, last {losses[-1]:.4f}")
    gap = max(abs(a - b) for a, b in zip(losses, reference_losses))
    print(f"largest loss difference to one device: {gap:.2e}")
    weights = max((p.values[r].cpu() - q.cpu()).abs().max().item()
                  for p, q in zip(model.parameters(), reference.parameters()) for r in range(len(p.values)))
    print(f"largest weight difference to one device (every replica's copy): {weights:.2e}")


if __name__ == "__main__":
    main()
