"""``torch.nn.SyncBatchNorm`` in a strategy's scope synchronises over the replicas (issue 23, item 8);
plain BatchNorm keeps one running statistic per replica, read as their mean (docs/architecture.md)."""

from __future__ import annotations

from tests.conftest import run_fresh

MODEL = """
import torch, multidev as md
torch.set_default_dtype(torch.float64)
GLOBAL = 12

def configure(n):
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * n)

def make(norm):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), norm(4), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 4 * 4, 3))

def data(steps=3):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(GLOBAL, 2, 6, 6, generator=g) * 3 + 1, torch.randn(GLOBAL, 3, generator=g))
               for _ in range(steps)]
    return md.data.Dataset.from_tensor_slices((torch.cat([x for x, _ in batches]),
                                               torch.cat([y for _, y in batches]))).batch(GLOBAL)

def train(strategy, norm, steps=3):
    with strategy.scope():
        model = make(norm)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    def step(x, y):
        optimizer.zero_grad()
        md.nn.compute_average_loss(((model(x) - y) ** 2).sum(1), global_batch_size=GLOBAL).backward()
        optimizer.step()
    for x, y in strategy.experimental_distribute_dataset(data(steps)):
        strategy.run(step, args=(x, y))
    return model

def worst(reference, model):
    out = 0.0
    for (name, a), b in zip(reference.state_dict().items(), model.state_dict().values()):
        copies = b.values if isinstance(b, md.distribute.DistributedValues) else [b]
        out = max([out] + [float((c.double() - a.double()).abs().max()) for c in copies])
    return out
"""


def test_sync_batch_norm_on_replicas_equals_batch_norm_on_one_device():
    proc = run_fresh(MODEL + """
configure(3)
reference = train(md.distribute.OneDeviceStrategy("/cpu:0"), torch.nn.BatchNorm2d)
for n in (2, 3):
    model = train(md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(n)]), torch.nn.SyncBatchNorm)
    print("REPLICAS", n, isinstance(model[1], torch.nn.SyncBatchNorm), worst(reference, model))
# converted from BatchNorm the way DDP programs do it, in the scope
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(make(torch.nn.BatchNorm2d))
print("CONVERTED", type(converted[1]).__name__)
# unsynchronised before: each replica normalised its own slice (as BatchNorm2d on replicas does)
plain = train(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), torch.nn.BatchNorm2d)
print("PLAIN_DIFFERS", worst(reference, plain) > 1e-6)
""", timeout=120)
    lines = {line.split()[0] + (line.split()[1] if line.startswith("REPLICAS") else ""): line.split()
             for line in proc.stdout.splitlines() if line.strip()}
    for n in ("2", "3"):
        fields = lines["REPLICAS" + n]
        assert fields[2] == "True" and float(fields[3]) < 1e-12, proc.stdout
    assert lines["CONVERTED"][1] == "ReplicaSyncBatchNorm", proc.stdout
    assert lines["PLAIN_DIFFERS"][1] == "True", proc.stdout


def test_batch_norm_running_statistics_are_each_replicas_own_read_as_their_mean():
    # The documented choice: replica r updates its copy with its own slice's statistics (DDP's rank r
    # without buffer broadcast); a cross-replica read (and a checkpoint) gives the mean of the copies.
    # DDP (broadcast_buffers=True) keeps rank 0's instead.
    proc = run_fresh(MODEL + """
configure(2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
model = train(strategy, torch.nn.BatchNorm2d, steps=1)
x, _ = next(iter(data(1)))
bn = model[1]
initial_conv = make(torch.nn.BatchNorm2d)[0]      # the weights the step's forward pass used
with torch.no_grad():
    expected = [0.1 * initial_conv(half).mean(dim=(0, 2, 3)) for half in x.chunk(2)]   # momentum 0.1, from 0
copies = bn.running_mean.values
print("OWN", max(float((c - e).abs().max()) for c, e in zip(copies, expected)))
print("READ_IS_MEAN", float((bn.running_mean.detach() - (copies[0] + copies[1]) / 2).abs().max()))
print("SAVED_IS_MEAN", float((model.state_dict()["1.running_mean"] - (copies[0] + copies[1]) / 2).abs().max()))
""", timeout=120)
    values = dict(line.split() for line in proc.stdout.splitlines() if line.strip())
    assert float(values["OWN"]) < 1e-12, proc.stdout
    assert float(values["READ_IS_MEAN"]) < 1e-15, proc.stdout
    assert float(values["SAVED_IS_MEAN"]) < 1e-15, proc.stdout
