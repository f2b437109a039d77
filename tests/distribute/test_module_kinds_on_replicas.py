"""torch.nn module kinds that need care on replicas: lazy modules, SyncBatchNorm converted outside the
scope, modules built before any strategy, tied weights, spectral norm. Each trains as one device on
the global batch (float64) or is refused, before any update, with the fix in the message.

One fresh interpreter for every case (device configuration is per process); the modules "built
before any strategy" are made before the first strategy exists, when no registration hook is live.
"""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
torch.set_default_dtype(torch.float64)
F = torch.nn.functional

# --- built before any strategy existed (no hook saw them) -------------------------------------------
torch.manual_seed(5)
extractor = torch.nn.Linear(6, 6)                                  # requires grad, no optimizer over it
frozen_sbn = torch.nn.SyncBatchNorm.convert_sync_batchnorm(
    torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.BatchNorm1d(3))).requires_grad_(False)

cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

g = torch.Generator().manual_seed(0)
X = [torch.randn(8, 1, 6, generator=g) * 3 + 1 for _ in range(3)]
Y = [torch.randn(8, 1, generator=g) for _ in range(3)]
halves = lambda t: md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))


def components(var):
    assert isinstance(var, md.distribute.DistributedValues), type(var)
    return [c.detach() for c in var.values]


def same(model, reference, atol=1e-13):
    """Every replica's copy of every parameter and buffer equals one device's."""
    mine = dict(model.named_parameters()) | dict(model.named_buffers())
    for name, want in list(reference.named_parameters()) + list(reference.named_buffers()):
        for c in components(mine[name]):
            torch.testing.assert_close(c, want.detach().to(c.dtype), rtol=0, atol=atol, msg=name)


def train(model, opt, loss_fn, xs, ys, on_replicas):
    def step(x, y):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    for x, y in zip(xs, ys):
        strategy.run(step, args=(halves(x), halves(y))) if on_replicas else step(x, y)


def refused(fn, *needles):
    try:
        fn()
    except ValueError as err:
        for needle in needles:
            assert needle in str(err), (needle, str(err))
        return str(err)
    raise AssertionError(f"not refused: {needles}")


mse = lambda out, y: F.mse_loss(out, y)

# --- 1. lazy modules --------------------------------------------------------------------------------
def lazy_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.LazyConv1d(2, 3), torch.nn.Flatten(), torch.nn.LazyLinear(3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1))

def reference_lazy(first):
    ref = lazy_net()
    torch.manual_seed(1)
    ref(first)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    train(ref, opt, mse, X, Y, False)
    return ref

for dry_run_in_scope in (True, False):     # a dry run on a sample batch, in the scope or after it
    with strategy.scope():
        model = lazy_net()
        if dry_run_in_scope:
            torch.manual_seed(1); model(X[0][:2])
    if not dry_run_in_scope:
        torch.manual_seed(1); model(X[0][:2])
    assert type(model[2]) is torch.nn.Linear and all(isinstance(p, md.distribute.DistributedValues) for p in model.parameters())
    with strategy.scope():
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, mse, X, Y, True)
    same(model, reference_lazy(X[0][:2]))

# The first forward pass inside strategy.run: materialized once (replica 0's shapes), mirrored, and the
# gradients of that very backward pass reduced (DDP's) for new and old parameters alike.
with strategy.scope():
    model = lazy_net()
def first_step(x, y):
    mse(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]
torch.manual_seed(1)
grads = strategy.experimental_local_results(strategy.run(first_step, args=(halves(X[0]), halves(Y[0]))))
ref = lazy_net(); torch.manual_seed(1); mse(ref(X[0]), Y[0]).backward()
for replica_grads in grads:
    for got, want in zip(replica_grads, [p.grad for p in ref.parameters()]):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-13)
model.zero_grad()
with strategy.scope():
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
train(model, opt, mse, X, Y, True)
same(model, reference_lazy(X[0]))

# An optimizer over a lazy module's parameters from before its first forward pass is refused at its
# step, before any update.
with strategy.scope():
    model = lazy_net()
    early = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(1)
refused(lambda: train(model, early, mse, X[:1], Y[:1], True), "SGD", "'LazyConv1d.weight'", "'LazyLinear.bias'",
        "Run one forward pass on a sample batch in the scope")
ref = lazy_net(); torch.manual_seed(1); ref(X[0])
same(model, ref)

# LazyBatchNorm1d: its parameters are mirrored, its running statistics per replica (as BatchNorm's),
# each holding the dry run's batch, as every DDP rank's does.
sample = torch.randn(4, 3) + 2.0
with strategy.scope():
    norm = torch.nn.LazyBatchNorm1d()
    norm(sample)
reference = torch.nn.BatchNorm1d(3); reference(sample)
assert type(norm) is torch.nn.BatchNorm1d and type(norm.weight).__name__ == "MirroredVariable"
assert type(norm.running_mean).__name__ == "SyncOnReadVariable", type(norm.running_mean)
same(norm, reference)

# A copy made before the first forward pass (copy.deepcopy) is mirrored by its own dry run too.
import copy
with strategy.scope():
    twin = copy.deepcopy(lazy_net())
twin(X[0][:2])
assert all(type(p).__name__ == "MirroredVariable" for p in twin.parameters())

# An UninitializedParameter in a module that is no lazy module cannot be mirrored: said at registration.
class Odd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.UninitializedParameter()
with strategy.scope():
    refused(Odd, "Odd.w", "LazyModuleMixin")

# --- 2. SyncBatchNorm converted outside the scope, inside it; one built before any strategy ---------
def bn_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 3), torch.nn.BatchNorm1d(3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1))

X_BN = [x + torch.arange(8.0).view(8, 1, 1) for x in X]   # the halves' statistics differ
square = lambda out, y: out.pow(2).mean()
reference = torch.nn.SyncBatchNorm.convert_sync_batchnorm(bn_net())
train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), square, X_BN, Y, False)
for converted_in_scope in (False, True):
    with strategy.scope():
        model = bn_net()
        if converted_in_scope:
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if not converted_in_scope:
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    with strategy.scope():
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert isinstance(model[2], torch.nn.SyncBatchNorm)
    train(model, opt, square, X_BN, Y, True)
    same(model, reference)     # running_var included: the global batch's, on every replica

# Without parameters or running statistics (nothing to distribute) it still synchronises.
with strategy.scope():
    bare = torch.nn.SyncBatchNorm(3, affine=False, track_running_stats=False)
z = torch.randn(8, 3) + torch.arange(8.0).view(8, 1)
out = torch.cat(strategy.experimental_local_results(strategy.run(bare, args=(halves(z),))))
torch.testing.assert_close(out, F.batch_norm(z, None, None, training=True), rtol=0, atol=1e-12)

# Built (and converted) before any strategy: frozen, so only its unsynchronised statistics are wrong.
refused(lambda: strategy.run(frozen_sbn, args=(halves(X[0][:, 0]),)), "SyncBatchNorm", "neither created nor converted",
        "convert_sync_batchnorm(model), inside `with strategy.scope():`")
frozen_sbn.eval()
strategy.run(frozen_sbn, args=(halves(X[0][:, 0]),))        # evaluation only reads it: fine
frozen_sbn.train()

# --- 3. a module built before any strategy, only run forward in the replicas -----------------------------
with strategy.scope():
    head = torch.nn.Linear(6, 1)
    head_opt = torch.optim.SGD(head.parameters(), lr=0.1)
def features_step(x, y):
    head_opt.zero_grad()
    mse(head(torch.tanh(extractor(x[:, 0]))), y).backward()
    head_opt.step()
before = extractor.weight.detach().clone()
refused(lambda: strategy.run(features_step, args=(halves(X[0]), halves(Y[0]))), "Linear (parameters ['weight', 'bias'])",
        "built outside MirroredStrategy.scope()", "requires_grad_(False)", "torch.no_grad()")
assert extractor.weight.grad is None and torch.equal(extractor.weight, before), "refused before its backward"
# Read under torch.no_grad(), or frozen: fine, and the head trains as on one device.
def no_grad_step(x, y):
    with torch.no_grad():
        feats = torch.tanh(extractor(x[:, 0]))
    head_opt.zero_grad(); mse(head(feats), y).backward(); head_opt.step()
strategy.run(no_grad_step, args=(halves(X[0]), halves(Y[0])))
extractor.requires_grad_(False)
for x, y in zip(X[1:], Y[1:]):
    strategy.run(features_step, args=(halves(x), halves(y)))
assert extractor.weight.grad is None
ref_head = torch.nn.Linear(6, 1); ref_head.load_state_dict({k: v.detach() for k, v in head.state_dict().items()})
# (a fresh comparison: head again from its first values)
with strategy.scope():
    torch.manual_seed(3); head = torch.nn.Linear(6, 1); head_opt = torch.optim.SGD(head.parameters(), lr=0.1)
torch.manual_seed(3); ref_head = torch.nn.Linear(6, 1); ref_opt = torch.optim.SGD(ref_head.parameters(), lr=0.1)
for x, y in zip(X, Y):
    strategy.run(features_step, args=(halves(x), halves(y)))
    ref_opt.zero_grad(); mse(ref_head(torch.tanh(extractor(x[:, 0]))), y).backward(); ref_opt.step()
same(head, ref_head)

# The guard watches each step function's first successful run (its global forward pre-hook puts every
# module call on torch's slow path); a new function, or a closure made anew, is watched again.
from torch.nn.modules import module as torch_module
def make_probe():
    def probe():
        return len(torch_module._global_forward_pre_hooks)
    return probe
probe = make_probe()
watched = {int(n) for n in strategy.experimental_local_results(strategy.run(probe))}
again = {int(n) for n in strategy.experimental_local_results(strategy.run(probe))}
fresh_closure = {int(n) for n in strategy.experimental_local_results(strategy.run(make_probe()))}
assert watched == {1} and again == {0} and fresh_closure == {1}, (watched, again, fresh_closure)

# --- 4. tied weights (word_language_model --tied), spectral norm --------------------------------------
def tied():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(10, 6), torch.nn.Linear(6, 6), torch.nn.Tanh(), torch.nn.Linear(6, 10))
    net[3].weight = net[0].weight
    return net
tokens = [torch.randint(0, 10, (8,), generator=g) for _ in range(3)]
targets = [torch.randint(0, 10, (8,), generator=g) for _ in range(3)]
with strategy.scope():
    model = tied()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
assert model[3].weight is model[0].weight and len(list(model.parameters())) == 4
train(model, opt, F.cross_entropy, tokens, targets, True)
reference = tied()
train(reference, torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9), F.cross_entropy, tokens, targets, False)
same(model, reference)

def spectral():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 7), torch.nn.Tanh(), torch.nn.Linear(7, 1))
    torch.nn.utils.parametrizations.spectral_norm(net[1])    # its u, v buffers move at every forward
    return net
with strategy.scope():
    model = spectral()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, opt, mse, X, Y, True)
reference = spectral()
train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), mse, X, Y, False)
same(model, reference)
def legacy_spectral():   # torch's legacy spectral_norm writes module.weight in a forward pre-hook: per replica
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 7), torch.nn.Tanh(), torch.nn.Linear(7, 1))
    torch.nn.utils.spectral_norm(net[1])
    return net
with strategy.scope():
    model = legacy_spectral()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, opt, mse, X, Y, True)
reference = legacy_spectral()
train(reference, torch.optim.SGD(reference.parameters(), lr=0.1), mse, X, Y, False)
same(model, reference)

# Inside strategy.run, a new tensor over a shared module's variable is refused; a buffer's new value
# goes into the replica's own copy.
with strategy.scope():
    norm = torch.nn.BatchNorm1d(2)
def assign_buffer():
    rid = md.distribute.get_replica_context().replica_id_in_sync_group
    norm.running_mean = torch.full((2,), float(rid) + 1.0)
strategy.run(assign_buffer)
assert [c.tolist() for c in norm.running_mean.values] == [[1.0, 1.0], [2.0, 2.0]], norm.running_mean.values
def assign_parameter():
    norm.weight = torch.nn.Parameter(torch.zeros(2))
refused(lambda: strategy.run(assign_parameter), "'weight'", "share", "copy_")
assert type(norm.weight).__name__ == "MirroredVariable"
print("ok")
'''


def test_module_kinds_on_two_replicas_equal_one_device_or_are_refused(fresh):
    assert fresh(PROGRAM, timeout=240).stdout.strip().endswith("ok")
