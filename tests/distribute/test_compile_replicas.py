"""A torch.compile'd model in a strategy's scope (issue 23, item 10): no graph break at parameter reads
inside a replica, each replica computes with its own copies, and training equals the eager model's."""

from __future__ import annotations

from tests.conftest import run_fresh


def test_compiled_model_on_replicas_has_no_graph_break_and_trains_as_eager():
    proc = run_fresh("""
import torch, multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
torch.set_default_dtype(torch.float64)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 2))

g = torch.Generator().manual_seed(1)
x, y = torch.randn(24, 4, generator=g), torch.randn(24, 2, generator=g)
dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(8)

def train(compiled):
    with strategy.scope():
        model = make()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    forward = torch.compile(model, backend="aot_eager") if compiled else model
    def step(xb, yb):
        optimizer.zero_grad()
        md.nn.compute_average_loss(((forward(xb) - yb) ** 2).sum(1), global_batch_size=8).backward()
        optimizer.step()
    for xb, yb in strategy.experimental_distribute_dataset(dataset):
        strategy.run(step, args=(xb, yb))
    return model

with strategy.scope():
    probe = make()

def bump():   # replica 1's copy differs from replica 0's: each replica must read its own
    if md.distribute.get_replica_context().replica_id_in_sync_group == 1:
        with torch.no_grad():
            probe[0].weight.add_(1.0)

try:   # refused after the run (first_run_agreement: copies one replica wrote apart), the copies stay apart
    strategy.run(bump)
except ValueError as e:
    assert "replica 1's copy differs" in str(e), e
part = strategy.experimental_distribute_values_from_function(lambda ctx: x[:4])
import threading
explain_lock = threading.Lock()        # explain patches torch internals: one replica at a time

def explain(xb):
    with explain_lock:
        return torch.tensor(torch._dynamo.explain(probe)(xb).graph_break_count)

print("BREAKS", [int(b) for b in strategy.run(explain, args=(part,)).values])
compiled_out = strategy.run(lambda xb: torch.compile(probe, backend="eager")(xb), args=(part,))
eager_out = strategy.run(lambda xb: probe(xb), args=(part,))
print("OWN_COPIES", all(torch.equal(c, e) for c, e in zip(compiled_out.values, eager_out.values)),
      not torch.equal(compiled_out.values[0], compiled_out.values[1]))
eager, compiled = train(False), train(True)
print("WORST", max(float((c - e).abs().max()) for pc, pe in zip(compiled.parameters(), eager.parameters())
                   for c, e in zip(pc.values, pe.values)))
""", timeout=240)
    out = proc.stdout
    assert "BREAKS [0, 0]" in out, out
    assert "OWN_COPIES True True" in out, out
    assert float(out.split("WORST")[1].split()[0]) < 1e-12, out


def test_fullgraph_model_on_a_tensor_from_outside_the_step():
    """The step's first runs are watched for writes to tensors the replicas share (``shared_tensors``): the
    watch must not reach a fullgraph model's graph (dynamo could not trace it, and the first runs raised)."""
    proc = run_fresh("""
import torch, multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, fullgraph=True, backend="eager")
x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))   # one tensor every replica reads
outs = [strategy.run(lambda: compiled(x).sum()) for _ in range(6)]
print("EQUAL", all(torch.equal(v, model(x).sum()) for out in outs for v in out.values))
""", timeout=240)
    assert "EQUAL True" in proc.stdout, proc.stdout + proc.stderr
