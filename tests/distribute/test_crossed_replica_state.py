"""A Python object the step writes is one for all replicas (threads), where each DDP process has its own: a
list on a module that every replica appends to (reinforce's ``policy.saved_log_probs``). A replica's
backward over another replica's tensor is refused with the error naming the per-replica fix, also where
it first happens in a later run of the step function (no longer checked before the backward): there the
other replica's backward may have freed that part of the graph, and torch's "Trying to backward through
the graph a second time" said nothing of the cause. The fix (one list per replica) trains as one device.
"""

from __future__ import annotations

PROGRAM = r'''
import time
import torch, multidev as md
torch.set_default_dtype(torch.float64)
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    net.saved = []                                  # on the module, as reinforce's policy.saved_log_probs
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = md.distribute.PerReplica((torch.ones(2, 3), 2 * torch.ones(2, 3)))
rid = lambda: int(md.distribute.get_replica_context().replica_id_in_sync_group)
def step(x, everyone, saved):
    ctx = md.distribute.get_replica_context()
    opt.zero_grad()
    out = net(x).pow(2).mean()
    saved().append(out)
    ctx.all_reduce("sum", torch.zeros(()))          # both replicas appended
    loss = sum(saved()) if everyone and rid() == 1 else out
    if everyone and rid() == 1:
        time.sleep(0.2)                             # replica 0's backward first (either order is refused)
    loss.backward()
    opt.step()
    return loss.detach()
shared = lambda: net.saved
strategy.run(step, args=(x, False, shared))         # the first run: each replica's loss is its own
net.saved.clear()
for attempt in range(2):                            # a later run, not checked before its backward
    try:
        strategy.run(step, args=(x, True, shared))
    except RuntimeError as err:
        text = str(err)
        assert "Replica 1's loss.backward() reached replica 0's copy of 'Linear." in text, text
        assert "`policy.saved_log_probs[replica_id].append(...)`" in text, text
        assert "backward through the graph a second time" not in text, text
    else:
        raise AssertionError("a loss over another replica's tensor")
    net.saved.clear()
net.saved = {}                                      # the fix: one list per replica
own = lambda: net.saved.setdefault(rid(), [])
before = [p.detach().clone() for p in net.parameters()]
strategy.run(step, args=(x, True, own))
x0, x1 = x.values
with torch.no_grad():
    ref = torch.nn.Linear(3, 1)
    for r, p in zip(ref.parameters(), before):
        r.copy_(p)
((ref(x0).pow(2).mean() + ref(x1).pow(2).mean()) / 2).backward()
for p, r in zip(net.parameters(), ref.parameters()):
    assert torch.allclose(p.detach(), r.detach() - 0.1 * r.grad, rtol=0, atol=1e-14), (p, r)
print("OK")
'''


def test_a_backward_over_another_replicas_tensor_names_the_fix_in_any_run(fresh):
    proc = fresh(PROGRAM)
    assert proc.stdout.strip().endswith("OK"), proc.stdout
