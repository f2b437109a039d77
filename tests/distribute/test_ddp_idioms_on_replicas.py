"""The neighbours of ``tests/programs/idioms2.py``'s DDP idioms, on 2 replicas in one fresh interpreter:

* ``p.register_hook(hook)`` on a parameter made in the scope runs on every replica's gradient before
  the reduction (each DDP rank's order), its handle removes it from every copy, and inside a
  replica it hooks that replica's copy only; a post-accumulate-grad hook (an optimizer step in
  backward, on unreduced gradients) is refused;
* a buffer variable assigned to another module (``convert_sync_batchnorm``'s
  ``new.running_mean = old.running_mean``, or by hand) stays a buffer: ``parameters()``,
  ``requires_grad_(True)`` and ``state_dict`` see what torch's one-device model shows;
* ``nn.Embedding(max_norm=...)`` (its forward renormalises rows of the weight in place) is refused
  when built in the scope of several replicas; the message's fix, ``torch.renorm`` between steps,
  reaches every copy;
* a forward hook's features kept in a dict the replicas share: a replica whose loss uses another
  replica's tensor fails in its ``backward()`` naming the fix (one entry per replica), which gives
  DDP's result (in the next run: a backward that raised leaves no replica unable to reduce);
* ``torch.distributed``'s collectives and rank queries inside ``strategy.run`` raise ValueError naming
  multidev's equivalents; outside it, and once the strategies are freed, they are torch's own.
"""

from __future__ import annotations

PROGRAM = r'''
import gc
import torch, torch.distributed as dist, multidev as md
torch.set_default_dtype(torch.float64)
F = torch.nn.functional
ORIGINAL_ALL_REDUCE, ORIGINAL_GET_RANK = dist.all_reduce, dist.get_rank
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
halves = lambda t: md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))
g = torch.Generator().manual_seed(0)
x, y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)

# --- 1. gradient hooks on a parameter made in the scope ------------------------------------------------
def net():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1)

with strategy.scope():
    model = net()
seen = []
def clamp(grad):
    seen.append(tuple(grad.shape))
    return grad.clamp(-0.05, 0.05)
handle = model.weight.register_hook(clamp)
def backward(a, b):
    model.zero_grad()
    F.mse_loss(model(a), b).backward()
    return model.weight.grad.clone()
grads = strategy.experimental_local_results(strategy.run(backward, args=(halves(x), halves(y))))
halves_ref = []
for a, b in zip(torch.tensor_split(x, 2), torch.tensor_split(y, 2)):   # each DDP rank: clamp, then average
    ref = net()
    ref.weight.register_hook(lambda grad: grad.clamp(-0.05, 0.05))
    F.mse_loss(ref(a), b).backward()
    halves_ref.append(ref.weight.grad)
want = (halves_ref[0] + halves_ref[1]) / 2
assert len(seen) == 2, seen
for got in grads:
    torch.testing.assert_close(got, want, rtol=0, atol=1e-15)
handle.remove()                                     # from every replica's copy
strategy.run(backward, args=(halves(x), halves(y)))
assert len(seen) == 2, seen

def hook_in_replica(a, b):                          # registered inside the step: this replica's copy only
    rid = int(md.distribute.get_replica_context().replica_id_in_sync_group)
    scale = 0.0 if rid == 0 else 1.0
    h = model.weight.register_hook(lambda grad: grad * scale)
    grad = backward(a, b)
    h.remove()
    return grad
got = strategy.experimental_local_results(strategy.run(hook_in_replica, args=(halves(x), halves(y))))
ref = net(); F.mse_loss(ref(x[4:]), y[4:]).backward()
for g_ in got:                                      # (0 + replica 1's gradient) / 2
    torch.testing.assert_close(g_, ref.weight.grad / 2, rtol=0, atol=1e-15)

try:                                                # an optimizer step in backward: refused
    model.weight.register_post_accumulate_grad_hook(lambda p: None)
except ValueError as err:
    assert "before loss.backward() reduces" in str(err) and "optimizer.step() after loss.backward()" in str(err), err
else:
    raise AssertionError("a post-accumulate-grad hook on a distributed variable")

# --- 2. a buffer variable assigned to another module stays a buffer -----------------------------------
def bn_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
reference = torch.nn.SyncBatchNorm.convert_sync_batchnorm(bn_net())
with strategy.scope():
    converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(bn_net())
    by_hand = torch.nn.BatchNorm1d(4)
    by_hand.running_mean = converted[1].running_mean   # a buffer variable set on another module
names = lambda pairs: [n for n, _ in pairs]
assert names(converted.named_parameters()) == names(reference.named_parameters()), names(converted.named_parameters())
assert names(converted.named_buffers()) == names(reference.named_buffers()), names(converted.named_buffers())
assert list(converted.state_dict()) == list(reference.state_dict())
assert "running_mean" not in dict(by_hand.named_parameters()) and by_hand.running_mean is converted[1].running_mean
converted.requires_grad_(True)                     # unfreezing: parameters only
assert not converted[1].running_var.requires_grad
assert type(converted[1].running_mean).__name__ == "SyncOnReadVariable"

# --- 3. nn.Embedding(max_norm=...) writes its weight in every forward: refused when built, the fix works
try:
    with strategy.scope():
        torch.nn.Embedding(6, 3, max_norm=1.0)
except ValueError as err:
    assert "nn.Embedding(max_norm=1.0) built in MirroredStrategy.scope() (2 replicas)" in str(err), err
    assert "emb.weight.copy_(torch.renorm(emb.weight, 2, 0, 1.0))" in str(err), err
else:
    raise AssertionError("max_norm in the scope of 2 replicas")
with strategy.scope():
    emb = torch.nn.Embedding(6, 3)
with torch.no_grad():
    emb.weight.data.mul_(4.0)
    emb.weight.copy_(torch.renorm(emb.weight, 2, 0, 1.0))   # the message's fix, between steps
for copy in emb.weight.values:
    assert torch.allclose(copy.norm(dim=1), torch.ones(6)), copy.norm(dim=1)
    torch.testing.assert_close(copy, emb.weight.values[0], rtol=0, atol=0)

# --- 4. a forward hook's features kept in a dict: shared by the replicas' threads, unlike DDP's processes ----
with strategy.scope():
    torch.manual_seed(0)
    fnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    fopt = torch.optim.SGD(fnet.parameters(), lr=0.5)
features = {}
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)
def keep_shared(module, inputs, output):
    if rid() == 1:            # (only replica 1 writes: replica 0 reads its tensor, deterministically)
        features["h"] = output
def feature_step(a, b):
    ctx = md.distribute.get_replica_context()
    fopt.zero_grad()
    out = fnet(a)
    ctx.all_reduce("sum", torch.zeros(()))           # replica 1 has written
    loss = F.mse_loss(out, b) + features[key()].pow(2).mean()
    if rid() == 1:
        ctx.all_reduce("sum", torch.zeros(()))       # replica 0's backward first
    loss.backward()
    fopt.step()
key = lambda: "h"
hook = fnet[1].register_forward_hook(keep_shared)
try:
    strategy.run(feature_step, args=(halves(x), halves(y)))
except RuntimeError as err:
    assert "Replica 0's loss.backward() reached replica 1's copy of 'Linear." in str(err), err
    assert "key it by md.distribute.get_replica_context().replica_id_in_sync_group" in str(err), err
else:
    raise AssertionError("a loss over another replica's features")
hook.remove()
with strategy.scope():                                 # the fix: one entry per replica
    torch.manual_seed(0)
    fnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    fopt = torch.optim.SGD(fnet.parameters(), lr=0.5)
fnet[1].register_forward_hook(lambda module, inputs, output: features.__setitem__(rid(), output))
key = rid
def plain_feature_step(a, b):
    fopt.zero_grad()
    out = fnet(a)
    (F.mse_loss(out, b) + features[key()].pow(2).mean()).backward()
    fopt.step()
strategy.run(plain_feature_step, args=(halves(x), halves(y)))
torch.manual_seed(0)
ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
mine = {}
ref[1].register_forward_hook(lambda module, inputs, output: mine.__setitem__("h", output))
halves_x, halves_y = torch.tensor_split(x, 2), torch.tensor_split(y, 2)
for a, b in zip(halves_x, halves_y):                   # DDP: each rank's own features, gradients averaged
    (0.5 * (F.mse_loss(ref(a), b) + mine["h"].pow(2).mean())).backward()
ref_opt.step()
for got, want in zip(fnet.parameters(), ref.parameters()):
    for copy in got.values:
        torch.testing.assert_close(copy, want.detach(), rtol=0, atol=1e-14)

# --- 5. torch.distributed inside strategy.run ----------------------------------------------------------
def refused(fn, *needles):
    try:
        strategy.run(fn)
    except ValueError as err:
        for needle in needles:
            assert needle in str(err), (needle, str(err))
        return
    raise AssertionError("not refused")
refused(lambda: dist.get_rank(), "torch.distributed.get_rank inside strategy.run", "replica_id_in_sync_group")
refused(lambda: dist.get_world_size(), "torch.distributed.get_world_size", "strategy.num_replicas_in_sync")
refused(lambda: dist.all_reduce(torch.ones(2)), "torch.distributed.all_reduce", "get_replica_context().all_reduce('sum', value)",
        "strategy.reduce('mean', value, axis=None)")
refused(lambda: dist.barrier(), "torch.distributed.barrier")
assert not dist.is_initialized()
try:                                                # outside strategy.run: torch's own error
    dist.get_rank()
except ValueError as err:
    assert "Default process group has not been initialized" in str(err), err
else:
    raise AssertionError("torch's get_rank without a process group")
del strategy, model, converted, by_hand, handle, got, grads, emb, copy, fnet, fopt, features, hook
gc.collect(); gc.collect()
assert dist.all_reduce is ORIGINAL_ALL_REDUCE and dist.get_rank is ORIGINAL_GET_RANK, "torch's again"
print("ok")
'''


def test_ddp_idioms_neighbours_on_two_replicas(fresh):
    assert fresh(PROGRAM, timeout=180).stdout.strip().endswith("ok")
