"""PyTorch's training utilities called inside the step function act once per global step, as one
device (DDP's result): ``GradScaler`` (scale, growth tracker, skipped steps, ``unscale_`` per
replica, ``state_dict``), ``AveragedModel`` / EMA and ``SWALR``, ``update_bn`` after training, and
``ReduceLROnPlateau`` (the replicas' mean metric; a ``PerReplica`` in cross-replica context is a
``TypeError``). Every case trains 2 replicas and one device on the same global batches, in float64
where torch allows it, all in one fresh interpreter; torch's classes are torch's again once the
strategies are freed."""

from __future__ import annotations

_PROGRAM = r"""
import gc, math
import torch
import multidev as md
from torch.amp import GradScaler
from torch.optim import swa_utils
from torch.optim.lr_scheduler import ReduceLROnPlateau

F64 = torch.float64
ORIGINALS = {"GradScaler." + n: GradScaler.__dict__[n] for n in ("scale", "unscale_", "step", "update")}
ORIGINALS["AveragedModel.update_parameters"] = swa_utils.AveragedModel.__dict__["update_parameters"]

def torchs_own():
    current = {"GradScaler." + n: GradScaler.__dict__[n] for n in ("scale", "unscale_", "step", "update")}
    current["AveragedModel.update_parameters"] = swa_utils.AveragedModel.__dict__["update_parameters"]
    return current == ORIGINALS

assert torchs_own()
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert not torchs_own()

def batches(steps, dtype=F64, poison=None, batch=8, y_scale=1.0):
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(steps):
        x = torch.randn(batch, 5, generator=g, dtype=dtype)
        y = torch.randn(batch, 1, generator=g, dtype=dtype) * y_scale
        if i == poison:
            x[batch - 1, 0] = math.inf          # one example in the second replica's half
        out.append((x, y))
    return out

def replica():
    return md.distribute.get_replica_context().replica_id_in_sync_group.item()

def distributed(data):
    xs, ys = torch.cat([x for x, _ in data]), torch.cat([y for _, y in data])
    return strategy.experimental_distribute_dataset(
        md.data.Dataset.from_tensor_slices((xs, ys)).batch(len(data[0][0])))

def mlp(norm=None, dtype=F64):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(5, 6)] + ([norm(6)] if norm else []) + [torch.nn.Tanh(), torch.nn.Linear(6, 1)]
    return torch.nn.Sequential(*layers).to(dtype)

def train(program, data, on_replicas):
    '''program(make, on_replicas) -> (objects, step(x, y) -> record); make(fn) builds in the scope on
    replicas; each record is what one step returned (a PerReplica on replicas).'''
    objects, step = program(lambda fn: _in_scope(fn) if on_replicas else fn(), on_replicas)
    records = []
    for x, y in (distributed(data) if on_replicas else data):
        records.append(strategy.run(step, args=(x, y)) if on_replicas else step(x, y))
    return objects, records

def _in_scope(fn):
    with strategy.scope():
        return fn()

def same(a, b, atol=1e-13, rtol=0.0):
    copies = a.values if isinstance(a, md.distribute.DistributedValues) else [a]
    for c in copies:
        torch.testing.assert_close(c.detach(), b.detach(), atol=atol, rtol=rtol)

def same_weights(model, reference, **tol):
    for p, q in zip(model.parameters(), reference.parameters()):
        same(p, q, **tol)
    for p, q in zip(model.buffers(), reference.buffers()):
        same(p, q, **tol)

# --- GradScaler: float64, one step overflows (an inf in the second replica's half) ------------------
def scaler_program(make, on_replicas):
    def build():
        model = mlp()
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), \
            GradScaler("cpu", init_scale=4.0, growth_interval=2)
    model, opt, scaler = make(build)
    def step(x, y):
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        scaler.step(opt)
        scaler.update()
        return scaler.get_scale(), scaler._get_growth_tracker()
    return (model, opt, scaler), step

data = batches(6, poison=3)
(model, opt, scaler), got = train(scaler_program, data, True)
(ref_model, ref_opt, ref_scaler), want = train(scaler_program, data, False)
assert [r for r in want] == [(4.0, 1), (8.0, 0), (8.0, 1), (4.0, 0), (4.0, 1), (8.0, 0)], want
assert [strategy.experimental_local_results(r)[0] for r in got] == want, got
same_weights(model, ref_model)
assert scaler.state_dict() == ref_scaler.state_dict() == {"scale": 8.0, "growth_factor": 2.0,
    "backoff_factor": 0.5, "growth_interval": 2, "_growth_tracker": 0}, scaler.state_dict()
restored = GradScaler("cpu")
restored.load_state_dict(scaler.state_dict())
assert restored.state_dict() == scaler.state_dict()

# A second unscale_ in one step is torch's error, on every replica.
def twice(x, y):
    opt.zero_grad()
    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
    scaler.unscale_(opt)
    scaler.unscale_(opt)
x, y = next(iter(distributed(data)))
try:
    strategy.run(twice, args=(x, y))
    raise SystemExit("a second unscale_ must raise")
except RuntimeError as e:
    assert "unscale_() has already been called" in str(e), e

# An inf in one replica's loss only: every replica skips and the scale backs off once.
with strategy.scope():
    model2 = mlp()
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1)
    scaler2 = GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
before = [p.values[1].detach().clone() for p in model2.parameters()]
def poisoned(x, y):
    opt2.zero_grad()
    loss = torch.nn.functional.mse_loss(model2(x), y)
    if replica() == 1:
        loss = loss * math.inf
    scaler2.scale(loss).backward()
    scaler2.step(opt2)
    scaler2.update()
    return scaler2.get_scale()
assert strategy.experimental_local_results(strategy.run(poisoned, args=(x, y))) == (512.0, 512.0)
for p, b in zip(model2.parameters(), before):
    for c in p.values:
        assert torch.equal(c.detach(), b)

# Gradients no backward reduced (set by hand): an inf in one replica's only still skips every replica.
def by_hand(bad):
    for p in model2.parameters():
        p.grad = torch.full_like(p, math.inf if bad and replica() == 1 else scaler2.get_scale())
    scaler2.step(opt2)
    scaler2.update()
    return scaler2.get_scale()
assert strategy.experimental_local_results(strategy.run(by_hand, args=(True,))) == (256.0, 256.0)
for p, b in zip(model2.parameters(), before):
    for c in p.values:
        assert torch.equal(c.detach(), b)
strategy.run(by_hand, args=(False,))   # finite: both step (gradients set by hand are summed: 1 + 1)
for p, b in zip(model2.parameters(), before):
    same(p, b - 0.1 * 2)

# bfloat16 autocast on float32 weights, init_scale=2**124 and large losses: the first step's float32
# gradients overflow; the scale backs off far below the limit (a scale within 2x of it could overflow
# the sum of the replicas' gradients where one device's mean does not).
def autocast_program(make, on_replicas):
    def build():
        model = mlp(dtype=torch.float32)
        return model, torch.optim.SGD(model.parameters(), lr=0.05), \
            GradScaler("cpu", init_scale=2.0 ** 124, growth_interval=2, backoff_factor=2.0 ** -8)
    model, opt, scaler = make(build)
    def step(x, y):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return scaler.get_scale()
    return (model, scaler), step

data32 = batches(8, dtype=torch.float32, y_scale=30.0)
(model, scaler), got = train(autocast_program, data32, True)
(ref_model, ref_scaler), want = train(autocast_program, data32, False)
assert want[0] < 2.0 ** 124, want              # the case skips steps
assert [strategy.experimental_local_results(r)[0] for r in got] == want, (got, want)
same_weights(model, ref_model, atol=2e-2, rtol=2e-2)   # bfloat16 products of halves vs the whole batch
print("grad scaler ok")

# --- AveragedModel (EMA built in the scope, SWA built outside it), SWALR, update_bn -----------------
def swa_program(make, on_replicas):
    def build():   # SyncBatchNorm on replicas normalises with the global batch, as BatchNorm on one device
        model = mlp(norm=torch.nn.SyncBatchNorm if on_replicas else torch.nn.BatchNorm1d)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.8))
        return model, opt, ema, swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3)
    model, opt, ema, swalr = make(build)
    swa = swa_utils.AveragedModel(model)   # outside the scope
    def step(x, y):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        ema.update_parameters(model)
        swa.update_parameters(model)
        swalr.step()
        return opt.param_groups[0]["lr"]
    return (model, ema, swa), step

data = batches(5)
(model, ema, swa), got = train(swa_program, data, True)
(ref_model, ref_ema, ref_swa), want = train(swa_program, data, False)
assert [strategy.experimental_local_results(r)[0] for r in got] == want, (got, want)
assert isinstance(ema.n_averaged, md.distribute.DistributedValues)   # in the scope: one counter per replica
assert not isinstance(swa.n_averaged, md.distribute.DistributedValues)
for mine, ref in ((ema, ref_ema), (swa, ref_swa)):
    n = mine.n_averaged
    counts = n.values if isinstance(n, md.distribute.DistributedValues) else [n]
    assert [int(c) for c in counts] == [int(ref.n_averaged)] * len(counts) and ref.n_averaged == 5, counts
    same_weights(mine.module, ref.module)
loader = [x for x, _ in batches(3, batch=6)]
swa_utils.update_bn(loader, swa)                  # cross-replica context
swa_utils.update_bn(loader, ref_swa)
same_weights(swa.module, ref_swa.module)
bn = swa.module[1]
assert bn.momentum == 0.1 and bn.running_mean.values[0].abs().sum() > 0

# An averaged copy of plain weights would be averaged once per replica: refused, naming the fix.
plain = swa_utils.AveragedModel(torch.nn.Linear(5, 1).double())
try:
    strategy.run(lambda: plain.update_parameters(model))
    raise SystemExit("plain averaged weights must be refused")
except ValueError as e:
    assert "'module.weight'" in str(e) and "strategy.scope()" in str(e), e
print("swa ok")

# --- ReduceLROnPlateau ----------------------------------------------------------------------------
def plateau_program(make, on_replicas):
    def build():
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return model, opt, ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=0)   # every step "worse"
    model, opt, plateau = make(build)
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        plateau.step(loss)   # each replica's is the mean of its half: their mean is one device's
        return opt.param_groups[0]["lr"]
    return (model, plateau), step

data = batches(5)
(model, plateau), got = train(plateau_program, data, True)
(ref_model, ref_plateau), want = train(plateau_program, data, False)
assert want[-1] < 0.1, want                       # the schedule reduced the rate
assert [strategy.experimental_local_results(r)[0] for r in got] == want, (got, want)
same_weights(model, ref_model)
assert plateau.best == ref_plateau.best or abs(plateau.best - ref_plateau.best) < 1e-13

# Replicas whose metrics differ: the scheduler sees their mean (here 3 and 5 -> 4, with mode min).
with strategy.scope():
    m3 = torch.nn.Linear(1, 1)
    o3 = torch.optim.SGD(m3.parameters(), lr=1.0)
    p3 = ReduceLROnPlateau(o3, mode="min", factor=0.5, patience=0, threshold=0.0)
p3.best = 4.5   # 4 improves on it (best 4); replica 0's 3 would make it 3, replica 1's 5 or the sum 8 keep 4.5
strategy.run(lambda: p3.step(3.0 + 2 * replica()))
assert p3.best == 4.0 and o3.param_groups[0]["lr"] == 1.0 and p3.last_epoch == 1, (p3.best, o3.param_groups)

per_replica = strategy.run(lambda: torch.tensor(1.0) * (1 + replica()))
try:
    p3.step(per_replica)
    raise SystemExit("a PerReplica metric must raise")
except TypeError as e:
    assert "strategy.reduce" in str(e) and "ReduceLROnPlateau" in str(e), e
p3.step(strategy.reduce("MEAN", per_replica, axis=None))   # 1.5: an improvement
assert p3.best == 1.5 and p3.last_epoch == 2, p3.best
print("plateau ok")
"""

_TAIL = r"""
for name in list(globals()):
    if not name.startswith("_") and name not in ("gc", "torchs_own", "ORIGINALS", "GradScaler", "swa_utils"):
        del globals()[name]
gc.collect()
gc.collect()
assert torchs_own(), "torch's classes once the last strategy is freed"
print("ok")
"""


def test_torch_utilities_inside_the_step_act_once_per_step(fresh):
    out = fresh(_PROGRAM + _TAIL, timeout=240)
    assert out.stdout.split() == ["grad", "scaler", "ok", "swa", "ok", "plateau", "ok", "ok"], out.stdout
