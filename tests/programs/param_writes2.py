"""``param_writes.py``'s second half: ULMFiT's gradual unfreezing, Lookahead and Polyak averaging by hand,
and Neural Transfer with the image a parameter of a module built in the scope. Imports only torch."""
from __future__ import annotations

import torch
from torch import optim

from param_writes import Net, _built, _loader, _result, _train
from pytutorials3 import neural_style_parameter

LR, DECAY = 0.05, 2.6   # ULMFiT: each lower group's rate is the one above's / 2.6
EPOCH = 2               # steps per epoch


def _groups(model):
    return [model.fc1, model.fc2, model.head]


def _discriminative(model):
    """ULMFiT's optimizer over every group from the start, each with its own learning rate."""
    groups = _groups(model)
    return optim.Adam([{"params": g.parameters(), "lr": LR / DECAY ** (len(groups) - 1 - k)}
                       for k, g in enumerate(groups)])


def _frozen(port, seed: int, opt):
    """All but the head frozen; a DDP model wrapped before (DDP reduces only what trains when wrapped)."""
    model, optimizer = _built(port, seed, opt=opt)
    model = port.wrap(model, find_unused_parameters=True)
    for group in _groups(port.module(model))[:-1]:
        group.requires_grad_(False)
    return model, optimizer


def _unfreeze(port, model, optimizer, i, add_group: bool):
    """At each epoch's start (step i > 0) the next group down trains: ``requires_grad_(True)``, and with
    ``add_group`` its parameters join the optimizer at their discriminative rate."""
    groups = _groups(port.module(model))
    k = len(groups) - 1 - i // EPOCH
    if i % EPOCH == 0 and i > 0 and k >= 0:
        groups[k].requires_grad_(True)
        if add_group:
            optimizer.add_param_group({"params": groups[k].parameters(), "lr": LR / DECAY ** (len(groups) - 1 - k)})


def _ulmfit(port, add_group: bool, in_step: bool) -> dict:
    opt = (lambda m: optim.Adam(m.head.parameters(), lr=LR)) if add_group else _discriminative
    model, optimizer = _frozen(port, 50, opt)
    unfreeze = lambda i: _unfreeze(port, model, optimizer, i, add_group)   # noqa: E731
    if in_step:   # the step unfreezes at its start, before its forward pass
        log = _train_unfreezing(port, model, optimizer, unfreeze)
    else:         # between epochs: after step i, before step i + 1
        log = _train(port, model, optimizer, _loader(51, 3 * EPOCH), between=lambda i: unfreeze(i + 1))
    return _result(port, log, model, groups=len(optimizer.param_groups))


def _train_unfreezing(port, model, optimizer, unfreeze) -> list:
    """The loop body unfreezes (and adds the group) itself, before its forward pass."""
    def step(x, y, i):
        unfreeze(i)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    batches = enumerate(port.distribute(_loader(51, 3 * EPOCH)))
    return [port.mean(port.run(step, args=(x, y, i))) for i, (x, y) in batches]


def ulmfit_requires_grad_between(port) -> dict:
    return _ulmfit(port, add_group=False, in_step=False)


def ulmfit_requires_grad_in_step(port) -> dict:
    return _ulmfit(port, add_group=False, in_step=True)


def ulmfit_add_param_group_between(port) -> dict:
    return _ulmfit(port, add_group=True, in_step=False)


def ulmfit_add_param_group_in_step(port) -> dict:
    return _ulmfit(port, add_group=True, in_step=True)


# --- Lookahead and Polyak averaging by hand ----------------------------------------------------------------
def _lookahead(port, in_step: bool, k: int = 2, alpha: float = 0.5) -> dict:
    model, opt = _built(port, 46, opt=lambda m: optim.Adam(m.parameters(), lr=LR))
    slow = {n: p.detach().clone() for n, p in model.named_parameters()}
    model = port.wrap(model)

    def sync(i):
        if (i + 1) % k == 0:
            for n, p in port.module(model).named_parameters():
                slow[n].add_(p.data - slow[n], alpha=alpha)
                p.data.copy_(slow[n])

    where = {"in_step": sync} if in_step else {"between": sync}
    log = _train(port, model, opt, _loader(47), **where)
    return _result(port, log, model)


def lookahead_in_step(port) -> dict:
    return _lookahead(port, in_step=True)


def lookahead_between(port) -> dict:
    return _lookahead(port, in_step=False)


def _polyak_plain(port, in_step: bool) -> dict:
    model, opt = _built(port, 48)
    avg = {n: p.detach().clone() for n, p in model.named_parameters()}
    model = port.wrap(model)

    def update(i):
        with torch.no_grad():
            for n, p in port.module(model).named_parameters():
                avg[n].mul_(0.99).add_(p.detach(), alpha=0.01)

    log = _train(port, model, opt, _loader(49), **({"in_step": update} if in_step else {"between": update}))
    return _result(port, log, model, averaged=torch.cat([t.reshape(-1) for t in avg.values()]).tolist())


def polyak_plain_in_step(port) -> dict:
    return _polyak_plain(port, in_step=True)


def polyak_plain_between(port) -> dict:
    return _polyak_plain(port, in_step=False)


def polyak_module_in_step(port) -> dict:
    """The average a second network built in the scope (each replica its own copy, as each rank)."""
    model, opt = _built(port, 48)
    with port.scope():
        ema = Net().double()
        ema.load_state_dict(model.state_dict())
        ema.requires_grad_(False)
    model = port.wrap(model)

    def update(i):
        with torch.no_grad():
            for pa, p in zip(ema.parameters(), port.module(model).parameters()):
                pa.mul_(0.99).add_(p.detach(), alpha=0.01)

    log = _train(port, model, opt, _loader(49), in_step=update)
    return _result(port, log, model, ema)


PARAM_WRITES2 = {f.__name__: f for f in (
    ulmfit_requires_grad_between, ulmfit_requires_grad_in_step, ulmfit_add_param_group_between,
    ulmfit_add_param_group_in_step, lookahead_in_step, lookahead_between, polyak_plain_in_step,
    polyak_plain_between, polyak_module_in_step, neural_style_parameter)}
