"""Run by test_replica_hyperparameters.py in a fresh interpreter (2 logical CPUs): step functions that
write hyperparameters into ``optimizer.param_groups`` inside ``strategy.run``, against the same program on
one device over the global batch (mean losses over equal halves: DDP's result up to float
reassociation; each DDP rank writes its own optimizer's groups once per step). Prints one JSON object:
case -> result."""

from __future__ import annotations

import copy
import io
import json
import time

import numpy as np
import torch
from torch import nn

import multidev as md

F64 = torch.float64
torch.set_default_dtype(F64)
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
g = torch.Generator().manual_seed(3)
X = [torch.randn(8, 4, generator=g) for _ in range(4)]
Y = [torch.randn(8, 1, generator=g) for _ in range(4)]
torch.manual_seed(0)
INITIAL = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)).state_dict()


def make_model():
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    model.load_state_dict(INITIAL)
    return model
RESULTS: dict = {}


def halves(t):
    return strategy.experimental_distribute_values_from_function(
        lambda ctx: t[4 * ctx.replica_id_in_sync_group:4 * ctx.replica_id_in_sync_group + 4])


def linger_in_replica_0():
    """Replica 0 waits between its read and its write, so the other replica's write lands in between."""
    ctx = md.distribute.get_replica_context()
    if ctx is not None and ctx.replica_id_in_sync_group == 0:
        time.sleep(0.01)


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def train(make_optimizer, body, distributed, steps=4, between=None):
    """``body(optimizer, k)`` runs in the step around ``optimizer.step()``; returns (model, optimizer, seen)."""
    seen = []
    if distributed:
        with strategy.scope():
            model = make_model()
            optimizer = make_optimizer(model)
    else:
        model = make_model()
        optimizer = make_optimizer(model)

    def step(x, y, k):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return body(optimizer, k)

    for k in range(steps):
        if distributed:
            out = strategy.run(step, args=(halves(X[k]), halves(Y[k]), k))
            seen.append([float(v) for v in strategy.experimental_local_results(out)])
        else:
            seen.append([float(step(X[k], Y[k], k))] * 2)
        if between is not None:
            between(optimizer, k)
    return model, optimizer, seen


def case(name, make_optimizer, body, between=None, read=lambda o: o.param_groups[0]["lr"]):
    try:
        ours = train(make_optimizer, body, True, between=between)
        ref = train(make_optimizer, body, False, between=between)
        RESULTS[name] = {"diff": max_diff(ours[0], ref[0]), "read": read(ours[1]), "reference": read(ref[1]),
                         "seen": ours[2], "seen_reference": ref[2]}
    except Exception as e:   # noqa: BLE001 - reported to the test
        RESULTS[name] = {"error": f"{type(e).__name__}: {e}"}


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)


def decay_after_step(optimizer, k):
    optimizer.step()
    for group in optimizer.param_groups:
        lr = group["lr"]
        linger_in_replica_0()
        group["lr"] = lr * 0.5     # `group["lr"] *= 0.5` with the race made certain
    return torch.tensor(optimizer.param_groups[0]["lr"])


def decay_in_place(optimizer, k):
    for group in optimizer.param_groups:
        group["lr"] *= 0.5          # before the step: the step uses the halved rate
        group["momentum"] *= np.float64(0.9)
    optimizer.step()
    return torch.tensor(optimizer.param_groups[0]["lr"])


def warm_up(optimizer, k):
    for group in optimizer.param_groups:
        group["lr"] = 0.3 * min(1.0, (k + 1) / 3)
    optimizer.step()
    return torch.tensor(optimizer.param_groups[0]["lr"])


def counted_in_group(optimizer, k):
    group = optimizer.param_groups[0]
    group["calls"] = group.get("calls", 0) + 1       # a key the group did not have
    group.setdefault("first", k)
    linger_in_replica_0()
    group["lr"] = group["lr"] * (0.9 if "calls" in group else 2.0)
    optimizer.step()
    return torch.tensor(float(group["calls"]))


def adam_groups(model):
    return torch.optim.Adam([{"params": model[0].parameters(), "lr": 0.05},
                             {"params": model[2].parameters()}], lr=0.01, betas=(0.9, 0.99))


def decay_every_group(optimizer, k):
    for group in optimizer.param_groups:
        group["lr"] *= 0.7
        group["betas"] = (0.8, 0.99)   # a tuple: shared, the same on every replica
    optimizer.step()
    return torch.tensor(optimizer.param_groups[1]["lr"])


def reset_between(optimizer, k):
    if k == 1:
        for group in optimizer.param_groups:
            group["lr"] = 0.4        # outside strategy.run: every replica's


def restored_midway(optimizer, k):
    if k == 1:
        optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))


case("decay_after_step", sgd, decay_after_step)
case("decay_before_step_in_place", sgd, decay_in_place,
     read=lambda o: [o.param_groups[0]["lr"], o.param_groups[0]["momentum"]])
case("warm_up_assigned", sgd, warm_up)
case("new_key_counted_per_replica", sgd, counted_in_group,
     read=lambda o: [o.param_groups[0]["calls"], o.param_groups[0]["first"], o.param_groups[0]["lr"]])
case("adam_two_groups", adam_groups, decay_every_group,
     read=lambda o: [[gr["lr"], list(gr["betas"])] for gr in o.param_groups])
case("written_between_runs", sgd, decay_after_step, between=reset_between)
case("after_load_state_dict", sgd, decay_after_step, between=restored_midway)

# A scheduler stepped in the step still steps once per step beside a hand-written decay.
def with_scheduler(model):
    optimizer = sgd(model)
    optimizer.scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    return optimizer


def scheduler_and_hand_decay(optimizer, k):
    optimizer.step()
    optimizer.scheduler.step()
    for group in optimizer.param_groups:
        group["weight_decay"] += 0.01
    return torch.tensor(optimizer.param_groups[0]["lr"])


case("scheduler_beside_hand_written", with_scheduler, scheduler_and_hand_decay,
     read=lambda o: [o.param_groups[0]["lr"], o.param_groups[0]["weight_decay"]])

# Replicas writing different values: refused after the run, naming the group, the key and the values.
with strategy.scope():
    model = make_model()
    optimizer = sgd(model)


def by_replica_id(x):
    ctx = md.distribute.get_replica_context()
    optimizer.param_groups[0]["lr"] = 0.1 * (1 + int(ctx.replica_id_in_sync_group))
    return x.sum()


def by_replica_id_tensor(x):   # TF's replica id is a tensor: so is the rate
    ctx = md.distribute.get_replica_context()
    optimizer.param_groups[0]["momentum"] = 0.5 + ctx.replica_id_in_sync_group * 0.25
    return x.sum()


for name, fn in (("different_values_refused", by_replica_id), ("different_tensors_refused", by_replica_id_tensor)):
    try:
        strategy.run(fn, args=(halves(X[0]),))
        RESULTS[name] = {"error": None}
    except ValueError as e:
        RESULTS[name] = {"error": str(e), "after": [float(optimizer.param_groups[0][k]) for k in ("lr", "momentum")]}
    # the next run is not refused for the earlier one's values
    strategy.run(lambda x: x.sum(), args=(halves(X[0]),))
    RESULTS[name]["next_run_ok"] = True


def halve_as_tensor(optimizer, k):
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] *= torch.tensor(0.5)    # a float times a tensor: a tensor rate from now on
    return torch.tensor(float(optimizer.param_groups[0]["lr"]))


case("tensor_rate_decayed", sgd, halve_as_tensor, read=lambda o: float(o.param_groups[0]["lr"]))


def tensor_sgd(model):
    return torch.optim.SGD(model.parameters(), lr=torch.tensor(0.2), momentum=0.9)


def filled_in_place(optimizer, k):
    optimizer.param_groups[0]["lr"].fill_(0.3 / (k + 1))   # changed in place, never assigned back
    linger_in_replica_0()
    optimizer.step()
    return torch.tensor(float(optimizer.param_groups[0]["lr"]))


case("tensor_rate_filled_in_place", tensor_sgd, filled_in_place, read=lambda o: float(o.param_groups[0]["lr"]))
buffer = io.BytesIO()
torch.save(optimizer.state_dict(), buffer)
buffer.seek(0)
RESULTS["group_types"] = {"user": type(optimizer.param_groups[0]).__name__,
                          "packed": type(optimizer.state_dict()["param_groups"][0]).__name__,
                          "weights_only_load": torch.load(buffer, weights_only=True)["param_groups"][0]["lr"],
                          "deepcopied": type(copy.deepcopy(optimizer).param_groups[0]).__name__}

print(json.dumps(RESULTS, default=repr))
