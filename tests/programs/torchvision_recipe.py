"""torchvision's classification reference recipe (references/classification/train.py, utils.py,
transforms.py) as a ``Program``, float64, on a tiny ResNet-like CNN with BatchNorm:

* ``set_weight_decay``: norm-layer parameters in a group without weight decay; SGD with Nesterov
  momentum and weight decay; ``CrossEntropyLoss(label_smoothing=0.1)`` on mixed (soft) targets;
* warm-up ``LinearLR`` then ``CosineAnnealingLR`` in a ``SequentialLR`` stepped once per epoch
  (2 steps an epoch), in ``after_step``;
* the EMA: ``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(...), use_buffers=True)``
  updated every ``model_ema_steps`` steps, its ``n_averaged.fill_(0)`` during the warm-up epoch,
  inside the step as train_one_epoch does it;
* ``model.train()`` / ``model.eval()``: after each epoch, ``evaluate`` of the model and of the EMA
  under ``torch.inference_mode()`` on a held-out batch (observed), then ``model.train()`` again;
* RandomMixup / RandomCutmix (transforms.py's tensor ops, ``roll(1, 0)`` over the batch) on each
  process's batch (the recipe does them in each process's collate_fn), their draws (lambda, the
  box) made with a generator and carried with the batch.

BatchNorm normalises each replica's slice and the mix rolls within it: DDP is the reference (no
one-device comparison). This module imports only torch: the DDP runner must not import multidev.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim import swa_utils

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen

CLASSES, SIDE, STEPS_PER_EPOCH, EMA_STEPS, WARMUP_EPOCHS = 5, 6, 2, 2, 1


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, CLASSES)
        for m in self.modules():   # torchvision's ResNet init, after the modules exist
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(x + self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def set_weight_decay(model, weight_decay, norm_weight_decay=None, norm_classes=None):
    """references/classification/utils.py's (without custom keys)."""
    if not norm_classes:
        norm_classes = [torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm,
                        torch.nn.modules.instancenorm._InstanceNorm, torch.nn.LocalResponseNorm]
    norm_classes = tuple(norm_classes)
    params = {"other": [], "norm": []}
    params_weight_decay = {"other": weight_decay, "norm": norm_weight_decay}

    def _add_params(module, prefix=""):
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if norm_weight_decay is not None and isinstance(module, norm_classes):
                params["norm"].append(p)
            else:
                params["other"].append(p)
        for child_name, child_module in module.named_children():
            _add_params(child_module, prefix=f"{prefix}.{child_name}" if prefix != "" else child_name)

    _add_params(model)
    return [{"params": params[key], "weight_decay": params_weight_decay[key]} for key in params if len(params[key]) > 0]


def _build():
    torch.manual_seed(90)
    model = TinyResNet().double()
    parameters = set_weight_decay(model, 1e-4, norm_weight_decay=0.0)
    optimizer = torch.optim.SGD(parameters, lr=0.2, momentum=0.9, weight_decay=1e-4, nesterov=True)
    main = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=2, eta_min=0.0)
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=WARMUP_EPOCHS)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[warmup, main], milestones=[WARMUP_EPOCHS])
    # torchvision's ExponentialMovingAverage(model, decay) is this AveragedModel (decay 0.9: 4 steps move it)
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True)
    g = _gen(92)
    return {"model": model, "opt": optimizer, "sched": scheduler, "ema": ema,
            "criterion": nn.CrossEntropyLoss(label_smoothing=0.1), "evaluated": [0.0, 0.0],
            "test": (torch.randn(6, 3, SIDE, SIDE, generator=g, dtype=F64), torch.randint(0, CLASSES, (6,), generator=g))}


def _batches():
    """Images, labels, and each step's mix: lambda (mixup), the cut box (cutmix), which of the two."""
    g = _gen(91)
    out = []
    for i in range(2 * STEPS_PER_EPOCH):
        images = torch.randn(GLOBAL_BATCH, 3, SIDE, SIDE, generator=g, dtype=F64)
        target = torch.randint(0, CLASSES, (GLOBAL_BATCH,), generator=g)
        lam = torch.rand(1, generator=g, dtype=F64).expand(GLOBAL_BATCH, 1).clone()
        corner = torch.randint(0, SIDE // 2, (2,), generator=g)
        box = torch.cat([corner, corner + SIDE // 2]).expand(GLOBAL_BATCH, 4).clone()
        cutmix = torch.full((GLOBAL_BATCH,), i % 2)
        out.append((images, target, lam, box, cutmix))
    return out


def mix(batch, target, lam, box, cutmix):
    """transforms.py's RandomMixup / RandomCutmix forward (p=1), with the step's draws."""
    target = F.one_hot(target, num_classes=CLASSES).to(dtype=batch.dtype)
    batch, target = batch.clone(), target.clone()
    batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
    if cutmix:
        x1, y1, x2, y2 = (int(v) for v in box)
        batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
        lam = float(1.0 - (x2 - x1) * (y2 - y1) / (SIDE * SIDE))
    else:
        batch_rolled.mul_(1.0 - lam)
        batch.mul_(lam).add_(batch_rolled)
    target_rolled.mul_(1.0 - lam)
    target.mul_(lam).add_(target_rolled)
    return batch, target


def _train_step(state, batch, carry):
    """train_one_epoch's loop body (step ``i`` of epoch ``epoch``, carried)."""
    (step,) = carry
    epoch, i = divmod(int(step), STEPS_PER_EPOCH)
    images, target, lam, box, cutmix = batch
    image, target = mix(images, target, float(lam[0, 0]), box[0], bool(cutmix[0]))
    model, optimizer, model_ema = state["model"], state["opt"], state["ema"]
    output = model(image)
    loss = state["criterion"](output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if model_ema and i % EMA_STEPS == 0:
        model_ema.update_parameters(model)
        if epoch < WARMUP_EPOCHS:
            model_ema.n_averaged.fill_(0)   # reset ema buffer to keep copying weights during warmup
    return loss.detach(), (step + 1,)


def evaluate(model, criterion, test) -> float:
    model.eval()
    with torch.inference_mode():
        image, target = test
        output = model(image)
        loss = criterion(output, target)
    return float(loss)


def distribute_bn(model, world_size, reduce=False):
    """timm/utils/distributed.py's: every rank's BatchNorm running statistics made their mean."""
    for bn_name, bn_buf in getattr(model, "module", model).named_buffers(recurse=True):
        if ("running_mean" in bn_name) or ("running_var" in bn_name):
            if reduce:
                torch.distributed.all_reduce(bn_buf, op=torch.distributed.ReduceOp.SUM)
                bn_buf /= float(world_size)
            else:
                torch.distributed.broadcast(bn_buf, 0)


def _end_of_epoch(state, i):
    """After each epoch: the scheduler's step, evaluate the model and the EMA, back to train().
    Before evaluating, timm's ``distribute_bn(reduce=True)`` of both where torch.distributed runs:
    multidev's cross-replica reads of BatchNorm statistics are the replicas' mean (docs/
    architecture.md), which DDP's ranks hold only so (torchvision evaluates with rank 0's)."""
    if i % STEPS_PER_EPOCH != STEPS_PER_EPOCH - 1:
        return
    state["sched"].step()
    if torch.distributed.is_available() and torch.distributed.is_initialized():   # timm's args.distributed
        for model in (state["model"], state["ema"]):
            distribute_bn(model, torch.distributed.get_world_size(), reduce=True)
    state["evaluated"] = [evaluate(state["model"], state["criterion"], state["test"]),
                          evaluate(state["ema"], state["criterion"], state["test"])]
    state["model"].train()   # train_one_epoch's first line


def _observe(state) -> list:
    return [state["opt"].param_groups[0]["lr"], float(state["ema"].n_averaged)] + state["evaluated"]


TORCHVISION_PROGRAMS = [
    Program("torchvision_classification", _build, _batches, _train_step, averaged=("ema",),
            initial_carry=lambda batch: (torch.zeros((), dtype=F64),), after_step=_end_of_epoch, observe=_observe,
            compare_one_device=False, ddp_kwargs={"broadcast_buffers": False}),   # timm's --no-ddp-bb
]
