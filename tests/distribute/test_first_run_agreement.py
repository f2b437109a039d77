"""State a generative model writes from the batch in ``forward`` through ``.data`` (invisible to torch's version
counter): rosinality's VQ-VAE EMA codebook buffers, moved from each replica's slice (its ``dist_fn.all_reduce``
does nothing without a process group), and Glow's ActNorm initialising ``loc``/``scale`` from the first batch it
sees. Each replica's copy held its own slice's numbers: the codebook trained silently off DDP's, ActNorm's init
was overwritten by each variable's owner replica's update. Now the copies of weights and module buffers (not
norm layers' running statistics) are compared after a step function's first run, and the weights' before
``optimizer.step()`` updates them: ``ValueError`` naming the variable and the fix
(``multidev/distribute/first_run_agreement.py``). With the statistics summed by the replica context's
``all_reduce``, or the initialising forward run on the global batch before training, they train as one device."""

from __future__ import annotations

from tests.conftest import run_fresh

PROGRAM = r"""
import torch
import multidev as md
from torch import nn
from torch.nn import functional as F

F64 = torch.float64
strategy = md.distribute.MirroredStrategy()
assert strategy.num_replicas_in_sync == 2
x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=F64)


def reduce_sum(t):
    return t.copy_(md.distribute.get_replica_context().all_reduce("sum", t))


class Codebook(nn.Module):   # rosinality's Quantize, cut down: EMA of the batch's sums through .data
    def __init__(self, reduce=None, no_grad=False):
        super().__init__()
        self.reduce, self.no_grad = reduce, no_grad
        self.proj = nn.Linear(3, 3).double()
        self.register_buffer("embed", torch.randn(3, 4, dtype=F64))
        self.register_buffer("embed_avg", self.embed.clone())

    def forward(self, x):
        z = self.proj(x)
        onehot = F.one_hot((z @ self.embed).argmax(1), 4).to(F64)
        quantize = F.embedding(onehot.argmax(1), self.embed.t())
        if self.training:
            embed_sum = z.detach().t() @ onehot
            if self.reduce is not None:
                self.reduce(embed_sum)
            if self.no_grad:
                with torch.no_grad():
                    self.embed_avg.mul_(0.8).add_(embed_sum, alpha=0.2)
                    self.embed.copy_(self.embed_avg)
            else:
                self.embed_avg.data.mul_(0.8).add_(embed_sum, alpha=0.2)
                self.embed.data.copy_(self.embed_avg)
        return (z + (quantize - z).detach()).pow(2).mean()


def train(model, opt, steps=3, data=x):
    def step(x):
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        return loss.detach()
    for _ in range(steps):
        strategy.run(step, args=(strategy.experimental_distribute_values_from_function(
            lambda ctx: data.tensor_split(2)[ctx.replica_id_in_sync_group]),))


def refused(fn):
    try:
        fn()
    except ValueError as e:
        return str(e)
    return None


def built(make, seed=1):
    torch.manual_seed(seed)
    with strategy.scope():
        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, opt


results = {}
# 1. the EMA from each replica's slice (as printed, dist_fn.all_reduce a no-op; or in place under no_grad)
for no_grad in (False, True):
    model, opt = built(lambda: Codebook(no_grad=no_grad))
    results[f"codebook_no_reduce_{no_grad}"] = refused(lambda: train(model, opt))

# 2. summed over the replicas: the global batch's EMA, one device's training
model, opt = built(lambda: Codebook(reduce=reduce_sum))
train(model, opt)
torch.manual_seed(1)
one = Codebook(reduce=None)
one_opt = torch.optim.SGD(one.parameters(), lr=0.1)
for _ in range(3):
    one_opt.zero_grad()
    one(x).backward()
    one_opt.step()
copies = strategy.experimental_local_results(model.embed)
results["reduced_embed_err"] = max(float((c - one.embed).abs().max()) for c in copies)
results["reduced_weight_err"] = float((model.proj.weight.detach() - one.proj.weight).abs().max())

# 3. BatchNorm's running statistics differ by design; a counter buffer agrees: both pass
class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn, self.fc = nn.BatchNorm1d(3).double(), nn.Linear(3, 1).double()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
    def forward(self, x):
        self.steps += 1
        return self.fc(self.bn(x)).pow(2).mean()
model, opt = built(Counted)
train(model, opt)
results["bn_copies_differ"] = not torch.equal(*strategy.experimental_local_results(model.bn.running_mean))
results["steps"] = int(model.steps)


# 4. Glow's ActNorm: data-dependent init in the first forward
class ActNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, 3, dtype=F64))
        self.scale = nn.Parameter(torch.ones(1, 3, dtype=F64))
        self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))
    def forward(self, x):
        if self.initialized.item() == 0:
            with torch.no_grad():
                self.loc.data.copy_(-x.mean(0, keepdim=True))
                self.scale.data.copy_(1 / (x.std(0, keepdim=True) + 1e-6))
            self.initialized.fill_(1)
        return (self.scale * (x + self.loc)).pow(2).mean() - torch.log(self.scale.abs()).sum()

model, opt = built(ActNorm)
results["actnorm_in_step"] = refused(lambda: train(model, opt))
kept_alive = model   # a program that caught the error keeps the model: later step functions still run
model, opt = built(ActNorm)
def init_only(x):
    with torch.no_grad():
        model(x)
results["actnorm_init_run"] = refused(lambda: strategy.run(init_only, args=(
    strategy.experimental_distribute_values_from_function(lambda ctx: x.tensor_split(2)[ctx.replica_id_in_sync_group]),)))
model, opt = built(ActNorm)
with torch.no_grad():
    model(x)          # the fix: initialise on the global batch, outside strategy.run
train(model, opt)
torch.manual_seed(1)
one = ActNorm()
one_opt = torch.optim.SGD(one.parameters(), lr=0.1)
with torch.no_grad():
    one(x)
for _ in range(3):
    one_opt.zero_grad()
    ((one(x.tensor_split(2)[0]) + one(x.tensor_split(2)[1])) / 2).backward()
    one_opt.step()
results["actnorm_outside_err"] = float((model.loc.detach() - one.loc).abs().max())

# 5. weights a NaN loss left (TerminateOnNaN keeps the model) agree: a later step function's first run passes
with strategy.scope():
    nan_model = nn.Linear(3, 1).double()
with torch.no_grad():
    nan_model.weight.fill_(float("nan"))
strategy.run(lambda: nan_model(x).sum().detach())
model, opt = built(lambda: Codebook(reduce=reduce_sum))
train(model, opt, steps=1)
results["after_nan"] = True
print("RESULTS", repr(results))
"""


def _results() -> dict:
    out = run_fresh(PROGRAM, env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=180).stdout
    return eval(out.split("RESULTS ", 1)[1])   # noqa: S307 - our own program's printed dict literal


def test_state_written_from_each_replica_batch_is_refused_and_the_fixes_train_as_one_device():
    r = _results()
    for no_grad in (False, True):
        message = r[f"codebook_no_reduce_{no_grad}"]
        assert message is not None and message.startswith("Buffer 'Codebook.embed"), message
        assert "get_replica_context().all_reduce('sum', t)" in message and "broadcast_buffers" in message, message
    assert r["reduced_embed_err"] < 1e-12 and r["reduced_weight_err"] < 1e-12, r
    assert r["bn_copies_differ"] and r["steps"] == 3, r
    message = r["actnorm_in_step"]
    assert message is not None and message.startswith("Variable 'ActNorm.loc") and "before optimizer.step()" in message
    assert "outside strategy.run" in message, message
    assert r["actnorm_init_run"] is not None and "after the step function's first strategy.run" in r["actnorm_init_run"]
    assert r["actnorm_outside_err"] < 1e-12, r
    assert r["after_nan"], r
