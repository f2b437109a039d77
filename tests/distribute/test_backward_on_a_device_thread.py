"""A CUDA backward runs in autograd's device thread, not the replica's (found on an H200, issue 28).

Autograd runs the CUDA part of every backward in one engine thread per physical GPU, shared by every
thread that calls ``backward``: two logical GPUs of one GPU queue both replicas' backwards there. The
gradient reduction used to wait for the other replica in that thread (queued with ``queue_callback``),
so the other replica's backward never ran: a hang until the collective timeout. These tests run on CPU
with autograd's engine call moved onto one shared thread, as CUDA's is, before the strategy is made.
"""

from __future__ import annotations

from tests.conftest import run_fresh

SHARED_ENGINE_THREAD = """
import concurrent.futures, torch, multidev as md
torch.set_default_dtype(torch.float64)
_engine = torch.autograd._engine_run_backward
_device_thread = concurrent.futures.ThreadPoolExecutor(1)   # autograd's one thread for a CUDA device
calls = []
def on_the_device_thread(*args, **kwargs):
    calls.append(1)
    return _device_thread.submit(_engine, *args, **kwargs).result()
torch.autograd._engine_run_backward = on_the_device_thread
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy()
"""


def test_gradients_reduce_when_every_backward_runs_in_one_shared_thread():
    out = run_fresh(SHARED_ENGINE_THREAD + """
GLOBAL = 8
def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
g = torch.Generator().manual_seed(1)
x, y = torch.randn(3 * GLOBAL, 4, generator=g), torch.randn(3 * GLOBAL, 1, generator=g)

with strategy.scope():
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
norms = []
def step(xb, yb):
    opt.zero_grad()
    for half in (slice(0, 2), slice(2, 4)):   # two backward passes a step (gradient accumulation)
        (torch.nn.functional.mse_loss(model(xb[half]), yb[half]) / 2).backward()
    norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)))   # reads the reduced .grad
    opt.step()
dataset = md.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL)
for xb, yb in strategy.experimental_distribute_dataset(dataset):
    strategy.run(step, args=(xb, yb))

ref = make()
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
ref_norms = []
for i in range(3):
    xb, yb = x[i * GLOBAL:(i + 1) * GLOBAL], y[i * GLOBAL:(i + 1) * GLOBAL]
    ref_opt.zero_grad()
    for r in range(2):   # DDP: each rank's two halves, the gradient averaged over the ranks
        xr, yr = xb[4 * r:4 * r + 4], yb[4 * r:4 * r + 4]
        for half in (slice(0, 2), slice(2, 4)):
            (torch.nn.functional.mse_loss(ref(xr[half]), yr[half]) / 4).backward()
    ref_norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)))
    ref_opt.step()
assert len(calls) >= 12, len(calls)   # every backward went through the shared thread
for p, e in zip(model.parameters(), ref.parameters()):
    for c in p.values:
        torch.testing.assert_close(c.detach(), e.detach(), rtol=1e-9, atol=1e-12)
for a, b in zip(norms[::2], ref_norms):
    assert abs(a - b) < 1e-9, (norms, ref_norms)
print("OK")
""", env={"MULTIDEV_COLLECTIVE_TIMEOUT": "20"}, timeout=120)
    assert "OK" in out.stdout


def test_a_collective_gradient_on_a_shared_device_thread_is_refused_not_a_hang():
    out = run_fresh(SHARED_ENGINE_THREAD + """
import time
with strategy.scope():
    model = torch.nn.Linear(4, 2)
def step(x):
    ctx = md.distribute.get_replica_context()
    feats = model(x)
    everyone = ctx.all_gather(feats, axis=0)   # SupCon's negatives from every replica, with a gradient
    everyone.pow(2).sum().backward()
x = md.data.Dataset.from_tensor_slices(torch.randn(8, 4)).batch(8)
start = time.monotonic()
try:
    for xb in strategy.experimental_distribute_dataset(x):
        strategy.run(step, args=(xb,))
except md.errors.FailedPreconditionError as err:
    message = str(err)
    assert "ctx.all_gather" in message and "logical devices of one cpu" in message, message
    assert "multidev launch" in message, message
    assert time.monotonic() - start < 15, "refused only at the collective timeout"
    print("REFUSED")
""", env={"MULTIDEV_COLLECTIVE_TIMEOUT": "30"}, timeout=120)
    assert "REFUSED" in out.stdout
