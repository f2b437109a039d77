"""The cases of ``test_functional_calls.py``, in a file (TorchScript reads its classes' source)."""
import threading
import torch
import multidev as md
from torch import nn
from torch.func import functional_call

F64 = torch.float64
strategy = md.distribute.MirroredStrategy()
assert strategy.num_replicas_in_sync == 2
both_inside = threading.Barrier(2)


def replica():
    return int(md.distribute.get_replica_context().replica_id_in_sync_group)


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2, dtype=F64))
        self.bias = nn.Parameter(torch.zeros(2, dtype=F64))
        self.register_buffer("count", torch.zeros((), dtype=F64))

    def forward(self, x, wait=True):
        first = self.weight.clone()
        if wait:
            both_inside.wait(timeout=30)   # both replicas are inside their own calls
        self.count = self.count + 1        # reassigned during the call (torch hands it back in the dict)
        return first, self.weight.clone(), self.bias.clone()


with strategy.scope():
    probe = Probe()
versions = [c._version for p in probe.parameters() for c in strategy.experimental_local_results(p)]

# 1. Each replica sees its own tensors while the other's call runs; the weights are not written.
def swapped(x):
    r = replica()
    given = {"weight": torch.full((2,), r + 1.0, dtype=F64), "count": torch.full((), 10.0 * r, dtype=F64)}
    first, second, bias = functional_call(probe, given, (x,))
    return first, second, bias, given["count"]

out = strategy.experimental_local_results(strategy.run(swapped, args=(torch.zeros(2, dtype=F64),)))
for r, (first, second, bias, count) in enumerate(out):
    assert first.tolist() == second.tolist() == [r + 1.0] * 2, (r, first, second)
    assert bias.tolist() == [0.0, 0.0]                 # not swapped: the replica's copy
    assert float(count) == 10.0 * r + 1, count         # the reassigned buffer, as torch returns it
for p in probe.parameters():
    for c in strategy.experimental_local_results(p):
        assert c.detach().tolist() == [0.0, 0.0]
assert [c._version for p in probe.parameters() for c in strategy.experimental_local_results(p)] == versions
assert [float(c) for c in strategy.experimental_local_results(probe.count)] == [0.0, 0.0]
print("own tensors ok")

# 2. Nested calls stack; the outer call's tensors come back when the inner one ends.
def nested():
    r = replica()
    outer = {"weight": torch.full((2,), 5.0 + r, dtype=F64)}
    inner = {"bias": torch.full((2,), 7.0, dtype=F64)}

    class Twice(nn.Module):
        def forward(self, x):
            seen_inner = functional_call(probe, inner, (x, False))
            return seen_inner, probe(x, False)

    wrapper = Twice()
    wrapper.probe = probe
    (w_in, _, b_in), (w_out, _, b_out) = functional_call(wrapper, {"probe." + k: v for k, v in outer.items()},
                                                         (torch.zeros(2, dtype=F64),))
    return w_in, b_in, w_out, b_out

for r, (w_in, b_in, w_out, b_out) in enumerate(strategy.experimental_local_results(strategy.run(nested))):
    assert w_in.tolist() == w_out.tolist() == [5.0 + r] * 2
    assert b_in.tolist() == [7.0, 7.0] and b_out.tolist() == [0.0, 0.0]
print("nested ok")

# 3. Gradients through a functional_call reach the swapped tensors only, as torch's (a MAML inner step).
def inner_step():
    fast = {n: p for n, p in probe.named_parameters()}
    loss = functional_call(probe, fast, (None, False))[0].sum() * (replica() + 1)
    grads = torch.autograd.grad(loss, list(fast.values()), allow_unused=True)
    fast = {n: p - 0.5 * g if g is not None else p for (n, p), g in zip(fast.items(), grads)}
    return functional_call(probe, fast, (None, False))[0]

for r, w in enumerate(strategy.experimental_local_results(strategy.run(inner_step))):
    assert w.tolist() == [-0.5 * (r + 1)] * 2, w
print("inner step ok")

# 4. torch's strict check, and a name that is no parameter or buffer (torch would set a shared attribute).
def strict():
    functional_call(probe, {"weight": torch.zeros(2, dtype=F64)}, (None, False), strict=True)

try:
    strategy.run(strict)
    raise SystemExit("strict passed")
except RuntimeError as e:
    assert "Missing key(s): 'bias', 'count'." in str(e), e

def not_a_tensor_slot():
    functional_call(probe, {"training_scale": torch.zeros(2, dtype=F64)}, (None, False))

try:
    strategy.run(not_a_tensor_slot)
    raise SystemExit("not refused")
except ValueError as e:
    assert "would set 'training_scale', which is no parameter or buffer of Probe" in str(e), e
print("refusals ok")

# 5. Cross-replica context: torch's own swap.
first, second, _ = functional_call(probe, {"weight": torch.ones(2, dtype=F64)}, (None, False))
assert first.tolist() == [1.0, 1.0] and probe.weight.detach().tolist() == [0.0, 0.0]

# 6. torch.jit.script: refused where replicas would train it, fine for inference after training.
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2, dtype=F64)

    def forward(self, x):
        return torch.tanh(self.linear(x))

with strategy.scope():
    eager = Block()
    opt = torch.optim.SGD(eager.parameters(), lr=0.1)
    scripted = torch.jit.script(Block())
x = torch.randn(4, 2, dtype=F64)

def train(x):
    opt.zero_grad()
    eager(x).sum().backward()
    opt.step()

strategy.run(train, args=(x,))
for_inference = torch.jit.script(eager)
assert torch.equal(for_inference(x), eager(x))   # outside strategy.run: the one set of weights
try:
    strategy.run(lambda x: scripted(x).sum().backward(), args=(x,))
    raise SystemExit("scripted module not refused")
except ValueError as e:
    assert "MirroredStrategy.run called the torch.jit.script-ed module Block, which holds variables" in str(e), e
print("scripted ok")
