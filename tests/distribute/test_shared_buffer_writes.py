"""A module built outside ``strategy.scope()`` whose buffer the step writes in place inside ``strategy.run``
(DINO's center updated with ``mul_``/``add_``, a BatchNorm built outside the scope in training mode) is one
object for all local replicas: the write ran once per replica on its one buffer, silently (each DDP rank
writes its own module's). Refused after the step function's first run, naming the buffer and the fixes
(``multidev/distribute/shared_buffers.py``); built in the scope, or in eval mode, it runs."""

from __future__ import annotations

from tests.conftest import run_fresh


def test_in_place_buffer_writes_of_a_module_shared_by_the_replicas_are_refused():
    proc = run_fresh("""
import torch
import multidev as md

strategy = md.distribute.MirroredStrategy()

class Center(torch.nn.Module):   # DINOLoss's center, updated in the step
    def __init__(self):
        super().__init__()
        self.register_buffer("center", torch.zeros(3))

    def forward(self, x):
        with torch.no_grad():
            self.center.mul_(0.9).add_(x.mean(0) * 0.1)
        return x - self.center

def refused(fn, x):
    try:
        strategy.run(fn, args=(x,))
    except ValueError as e:
        return str(e)
    return None

x = torch.ones(4, 3)
with strategy.scope():
    lin = torch.nn.Linear(3, 3)
shared = Center()
message = refused(lambda x: shared(lin(x)).sum(), x)
assert message and "'center' of Center" in message and "strategy.scope()" in message, message
with strategy.scope():
    own = Center()                       # built in the scope: each replica updates its own copy
assert refused(lambda x: own(lin(x)).sum(), x) is None
with torch.no_grad():
    once = lin(x).mean(0) * 0.1          # one update from zero, as each DDP rank makes (twice would be 0.19x)
for copy in strategy.experimental_local_results(own.center):
    torch.testing.assert_close(copy, once)

bn = torch.nn.BatchNorm1d(3)             # outside the scope, training mode: its running statistics
def normalised(x):
    with torch.no_grad():
        return bn(x).sum()
message = refused(normalised, torch.randn(4, 3))
assert message and "BatchNorm1d" in message and "eval mode" in message, message
bn.eval()
assert refused(normalised, torch.randn(4, 3)) is None   # inference writes nothing
built_in_step = refused(lambda x: torch.nn.BatchNorm1d(3)(x).sum(), torch.randn(4, 3))
assert built_in_step is None, built_in_step   # a module built in the step is the replica's own
print("DONE")
""", env={"MULTIDEV_LOGICAL_CPUS": "2"}, timeout=120)
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr
