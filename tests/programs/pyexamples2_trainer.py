"""A classic CIFAR trainer loop (the shape of kuangliu/pytorch-cifar's and timm-style scripts), as printed
with the port's changes only (``pyexamples2.py`` says which; runners in ``pyexamples2_run.py``), float64:
``CrossEntropyLoss(label_smoothing=0.1)``, ``loss / accum_steps`` with ``optimizer.step()`` every 2nd
micro-batch (one ``strategy.run`` each), ``clip_grad_norm_`` whose returned norm is logged, ``OneCycleLR``
stepped per update, SGD with nesterov momentum and weight decay; the running loss logged from inside the
step (``running_loss += loss.item()``, under a lock: the replicas are threads) in
``cifar_trainer_item_in_step``.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import threading

import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- a CIFAR trainer: label smoothing, accumulation, clip_grad_norm_, OneCycleLR, running loss ----------------
class SmallNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.classifier = nn.Linear(4 * 2 * 2, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def cifar_trainer(port, item_in_step=False) -> dict:
    torch.manual_seed(5)
    x = torch.rand(32, 3, 4, 4, generator=_gen(83), dtype=F64)
    trainloader = DataLoader(TensorDataset(x, (x.mean((2, 3)) @ torch.randn(3, 4, generator=_gen(84), dtype=F64)).argmax(1)),
                             batch_size=4, shuffle=True, generator=_gen(85))
    accum_steps, epochs = 2, 2
    with port.scope():
        net = SmallNet().double()
        criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
        optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
        scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2, epochs=epochs,
                                                  steps_per_epoch=len(trainloader) // accum_steps)
    model = port.wrap(net)
    running = {"loss": 0.0}
    lock = threading.Lock()

    def micro_step(i, inputs, targets):
        outputs = model(inputs)
        loss = criterion(outputs, targets) / accum_steps
        loss.backward()
        if item_in_step == "locked":
            with lock:   # (the replicas are threads: without it two `+=` can lose one)
                running["loss"] += loss.item()
        elif item_in_step:
            running["loss"] += loss.item()
        grad_norm = torch.zeros((), dtype=F64)
        if (i + 1) % accum_steps == 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        return loss.detach(), grad_norm

    log = []
    for epoch in range(epochs):
        model.train()
        running["loss"] = 0.0
        optimizer.zero_grad()
        for i, (inputs, targets) in enumerate(port.distribute(trainloader)):
            loss, grad_norm = port.run(micro_step, args=(i, inputs, targets))
            if not item_in_step:
                running["loss"] += port.mean(loss)
            if (i + 1) % accum_steps == 0:
                log.append([port.mean(grad_norm), scheduler.get_last_lr()[0]])
        log.append(port.ranks_sum(running["loss"]) if item_in_step else running["loss"])
    return {**port.weights(model), "log": log}


EXAMPLES_TRAINER = {"cifar_trainer": cifar_trainer,
                    "cifar_trainer_item_in_step": lambda port: cifar_trainer(port, item_in_step="locked")}
