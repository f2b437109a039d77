"""Stop-and-resume programs as PyTorch users write them, ported with two lines (built in ``strategy.scope()``,
the step in ``strategy.run`` over ``experimental_distribute_dataset``); each run uninterrupted, then stopped
and resumed by fresh objects from the files it saved in the current directory (the chief writes them):

* ``imagenet_resume``: pytorch/examples' ImageNet ``main.py`` -- ``save_checkpoint({'epoch', 'arch',
  'state_dict': model.state_dict(), 'best_acc1', 'optimizer', 'scheduler'} + the GradScaler's state,
  is_best)`` to ``checkpoint.pth.tar`` (``model_best.pth.tar`` copied), ``--resume``:
  ``torch.load(args.resume, map_location=loc)``, ``load_state_dict`` of each, ``start_epoch``, and
  ``train_sampler.set_epoch(epoch)`` on the job's ``DistributedSampler``; the strategy's port resumes
  on another number of replicas too (``port.other()``);
* ``resume_after_first_step``: the checkpoint loaded into a model and optimizer that already took a
  step (the optimizer's state exists and is replaced);
* ``ddp_checkpoint_finetune``: a checkpoint a DDP program saved (``module.`` keys, and
  ``model.module.state_dict()``) loaded for fine-tuning with a new head, ``strict=False``; as printed,
  with ``consume_prefix_in_state_dict_if_present``, and from the ``.module`` file;
* ``rng_resume``: dropout, a ``DataLoader(shuffle=True, generator=g)``, numpy's and Python's draws in the
  step; ``torch.get_rng_state()``, ``g.get_state()``, ``np.random.get_state()``, ``random.getstate()``
  saved and restored.

Each is ``program(port) -> dict`` over ``resume_run``'s ports. Float64, synthetic seeded data. Imports
only torch and numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

import random
import shutil

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH = 8


def _data(seed: int, n: int = 32, classes: int = 3) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 4, 4, generator=g, dtype=F64)
    return TensorDataset(x, (x.flatten(1).sum(1) > 0).long() + (x[:, 0, 0, 0] > 0.5).long() * (classes - 2))


class SmallNet(nn.Module):
    def __init__(self, classes: int = 3, dropout: float = 0.0):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten())
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.drop(self.features(x)))


# --- pytorch/examples imagenet/main.py, shrunk: 4 epochs of 32 images, a job's DistributedSampler -------------------
def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, 'model_best.pth.tar')


def _imagenet_objects(port):
    torch.manual_seed(0)
    with port.scope():
        model = SmallNet().double()
        optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)   # imagenet: 30, 0.1
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    return port.wrap(model), optimizer, scheduler, scaler


def _validate(model, val_dataset) -> float:
    model.eval()
    with torch.no_grad():
        x, y = val_dataset.tensors
        acc1 = float((model(x).argmax(1) == y).double().mean()) * 100
    model.train()
    return acc1


def imagenet_main(port, epochs: int, resume: str = "") -> dict:
    model, optimizer, scheduler, scaler = _imagenet_objects(port)
    criterion = nn.CrossEntropyLoss()
    start_epoch, best_acc1 = 0, 0
    if resume:
        loc = 'cpu'                                     # imagenet: 'cuda:{}'.format(args.gpu)
        checkpoint = torch.load(resume, map_location=loc)
        start_epoch = checkpoint['epoch']
        best_acc1 = checkpoint['best_acc1']
        model.load_state_dict(checkpoint['state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        scheduler.load_state_dict(checkpoint['scheduler'])
        scaler.load_state_dict(checkpoint['scaler'])
    train_dataset, val_dataset = _data(1), _data(2, n=16)
    train_sampler = port.sampler(train_dataset, seed=0)
    train_loader = DataLoader(train_dataset, batch_size=port.loader_batch(GLOBAL_BATCH), sampler=train_sampler)

    def step(images, target):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    losses, accs = [], []
    for epoch in range(start_epoch, epochs):
        train_sampler.set_epoch(epoch)
        for images, target in port.sharded(train_loader):
            losses.append(port.mean(port.run(step, args=(images, target))))
        acc1 = _validate(model, val_dataset)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        accs.append(acc1)
        if port.is_chief:
            save_checkpoint({'epoch': epoch + 1, 'arch': 'smallnet', 'state_dict': model.state_dict(),
                             'best_acc1': best_acc1, 'optimizer': optimizer.state_dict(),
                             'scheduler': scheduler.state_dict(), 'scaler': scaler.state_dict()}, is_best)
        port.barrier()                                 # the next process reads what the chief wrote
    return {"log": [losses, accs, [best_acc1, scaler.get_scale(), scheduler.get_last_lr()[0]]], **port.weights(model)}


def imagenet_resume(port) -> dict:
    full = imagenet_main(port, 4)
    imagenet_main(port, 2)                             # stopped after epoch 2 ...
    resumed = imagenet_main(port, 4, resume='checkpoint.pth.tar')
    imagenet_main(port, 2)
    other = imagenet_main(port.other(), 4, resume='checkpoint.pth.tar')   # ... on another replica count
    return {**resumed, "uninterrupted": full, "other": other}


# --- the checkpoint loaded after a step was taken --------------------------------------------------------------------
def _mlp_objects(port, seed=3):
    torch.manual_seed(seed)
    with port.scope():
        model = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3)).double()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    return port.wrap(model), optimizer


def _mlp_steps(port, model, optimizer, batches):
    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    return [port.mean(port.run(step, args=batch)) for batch in port.distribute(batches)]


def _mlp_batches(seed, steps):
    x, y = _data(seed, n=steps * GLOBAL_BATCH).tensors
    return DataLoader(TensorDataset(x.flatten(1), y), batch_size=GLOBAL_BATCH)


def resume_after_first_step(port) -> dict:
    model, optimizer = _mlp_objects(port)
    first = _mlp_steps(port, model, optimizer, _mlp_batches(4, 2))
    if port.is_chief:
        torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}, 'after_two.pt')
    port.barrier()
    uninterrupted = _mlp_steps(port, model, optimizer, _mlp_batches(5, 3))
    model, optimizer = _mlp_objects(port, seed=9)
    _mlp_steps(port, model, optimizer, _mlp_batches(6, 1))   # a step taken: Adam's state exists
    checkpoint = torch.load('after_two.pt', map_location='cpu')
    model.load_state_dict(checkpoint['model'])
    optimizer.load_state_dict(checkpoint['optimizer'])
    resumed = _mlp_steps(port, model, optimizer, _mlp_batches(5, 3))
    steps = sorted({float(s["step"]) for s in optimizer.state.values()})
    return {"log": [first, uninterrupted, resumed, steps], **port.weights(model)}


# --- a DDP program's checkpoint, fine-tuned with a new head ----------------------------------------------------------
def _finetune(port, state_dict_of):
    """A new 2-class head on the DDP-pretrained 3-class SmallNet: ``state_dict_of(model)`` loads it."""
    torch.manual_seed(11)
    with port.scope():
        model = SmallNet(classes=2).double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)
    loaded = state_dict_of(model)
    x, y = _data(8, n=16, classes=2).tensors

    def step(images, target):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), target)
        loss.backward()
        optimizer.step()
        return loss
    loader = DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)
    losses = [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    return {"log": [losses, loaded], **port.weights(model)}


def _without_head(state_dict, head='module.fc'):
    for k in list(state_dict.keys()):
        if k.startswith(head):
            del state_dict[k]
    return state_dict


def ddp_checkpoint_finetune(port) -> dict:
    path, module_path = port.ddp_checkpoints()

    def as_printed(model):                     # the DDP program: its model is wrapped, the keys match
        state_dict = _without_head(torch.load(path, map_location='cpu')['state_dict'])
        msg = model.load_state_dict(state_dict, strict=False)
        return sorted(msg.missing_keys)

    def prefix_consumed(model):                # the port: strip DDP's prefix first
        state_dict = _without_head(torch.load(path, map_location='cpu')['state_dict'])
        consume_prefix_in_state_dict_if_present(state_dict, 'module.')
        msg = port.module(model).load_state_dict(state_dict, strict=False)
        return sorted(msg.missing_keys)

    def from_module_file(model):               # DDP's `torch.save(model.module.state_dict(), PATH)`
        state_dict = _without_head(torch.load(module_path, map_location='cpu'), head='fc')
        return sorted(port.module(model).load_state_dict(state_dict, strict=False).missing_keys)

    out = {}
    for name, load in (("as_printed", as_printed), ("prefix_consumed", prefix_consumed),
                       ("module_file", from_module_file)):
        try:
            out[name] = _finetune(port, load)
        except Exception as e:   # noqa: BLE001 - recorded, checked by the test
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def ddp_pretrain(model_wrapper):
    """What the DDP job saved before (``resume_run.main_ddp``): 2 steps of SmallNet, then rank 0 writes
    ``{'state_dict': model.state_dict()}`` (``module.`` keys) and ``model.module.state_dict()``."""
    torch.manual_seed(5)
    model = model_wrapper(SmallNet().double())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    x, y = _data(7, n=16).tensors
    for xs, ys in zip(x.split(8), y.split(8)):
        optimizer.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        optimizer.step()
    return model


# --- random states -------------------------------------------------------------------------------------------------
def _rng_epoch(port, model, optimizer, loader):
    def step(x, y):
        optimizer.zero_grad()
        jitter = np.random.uniform(0.9, 1.1) * (1.0 + 0.05 * random.random())
        loss = F.cross_entropy(model(x * jitter), y)
        loss.backward()
        optimizer.step()
        return loss
    return [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]


def rng_main(port, epochs: int, resume: str = "") -> dict:
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    g = torch.Generator().manual_seed(1)
    with port.scope():
        model = SmallNet(dropout=0.3).double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)
    loader = DataLoader(_data(3), batch_size=GLOBAL_BATCH, shuffle=True, generator=g)
    start = 0
    if resume:
        checkpoint = torch.load(resume, weights_only=False)    # numpy's state is no plain tensor
        model.load_state_dict(checkpoint['model'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        torch.set_rng_state(checkpoint['torch_rng'])
        g.set_state(checkpoint['loader_rng'])
        np.random.set_state(checkpoint['numpy_rng'])
        random.setstate(checkpoint['python_rng'])
        start = checkpoint['epoch']
    losses = []
    for epoch in range(start, epochs):
        losses += _rng_epoch(port, model, optimizer, loader)
        if port.is_chief:
            torch.save({'epoch': epoch + 1, 'model': model.state_dict(), 'optimizer': optimizer.state_dict(),
                        'torch_rng': torch.get_rng_state(), 'loader_rng': g.get_state(),
                        'numpy_rng': np.random.get_state(), 'python_rng': random.getstate()}, 'rng.pt')
        port.barrier()
    return {"log": [losses], **port.weights(model)}


def rng_resume(port) -> dict:
    full = rng_main(port, 3)
    rng_main(port, 1)
    return {**rng_main(port, 3, resume='rng.pt'), "uninterrupted": full}


RESUME = {"imagenet_resume": imagenet_resume, "resume_after_first_step": resume_after_first_step,
          "ddp_checkpoint_finetune": ddp_checkpoint_finetune, "rng_resume": rng_resume}
