"""``model.eval()`` / ``model.train()`` inside ``strategy.run`` (``distribute/module_modes.py``): the
switch runs once with every replica paused, so each replica's passes run in the mode its DDP rank's
would, whatever the threads' timing; a call that changes nothing waits for nobody, one that only some
replicas make is refused at once; outside
``strategy.run``, and once the last strategy is freed, ``Module.train`` is torch's.

One fresh interpreter for every case (device configuration is per process).
"""

from __future__ import annotations

import pytest

PROGRAM = r'''
import gc, time, torch, multidev as md

ORIGINAL = torch.nn.Module.__dict__["train"]
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert torch.nn.Module.__dict__["train"] is not ORIGINAL


class SlowProbe(torch.nn.Module):
    """Its mode when a pass starts and when it ends, a slow layer in between (the other replica runs)."""
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Dropout(0.5)

    def forward(self, x):
        first = self.inner.training
        time.sleep(0.05 if md.distribute.get_replica_context().replica_id_in_sync_group == 0 else 0.0)
        return torch.tensor([float(first), float(self.inner.training)])


with strategy.scope():
    probe = SlowProbe()

def reference_then_train(x):
    probe.eval()
    with torch.no_grad():
        reference = probe(x)   # replica 0's is slow: replica 1 reaches train() first
    probe.train()
    return reference, probe(x)

for _ in range(3):
    reference, training = strategy.run(reference_then_train, args=(torch.zeros(1),))
    for r in range(2):
        assert reference.values[r].tolist() == [0.0, 0.0], (r, reference.values[r])   # eval mode throughout
        assert training.values[r].tolist() == [1.0, 1.0], (r, training.values[r])
assert probe.training and probe.inner.training

# A call that changes nothing (train() at the top of every step) waits for nobody: one replica alone.
def only_replica_0(x):
    if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
        assert probe.train() is probe
    return x + 1
strategy.run(only_replica_0, args=(torch.zeros(1),))

# A module each replica builds in the step: each switched once, each its own.
def own_module(x):
    layer = torch.nn.Dropout(0.5)
    assert layer.eval() is layer and not layer.training
    return x
strategy.run(own_module, args=(torch.zeros(1),))

# A switch only some replicas make is refused at once, naming it; nothing switched.
def replica_0_evaluates(x):
    if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
        probe.eval()
    return x
try:
    strategy.run(replica_0_evaluates, args=(torch.zeros(1),))
except md.errors.AbortedError as e:
    assert "merge_call(Module.train)" in str(e), e
else:
    raise AssertionError("a switch made by one replica alone passed")
assert probe.training and probe.inner.training

# Outside strategy.run: torch's method, its error for a mode that is no bool.
assert probe.eval() is probe and not probe.inner.training
try:
    probe.train("yes")
except ValueError as e:
    assert "boolean" in str(e), e
else:
    raise AssertionError("a non-bool mode was accepted")

del strategy, probe
gc.collect(); gc.collect()
assert torch.nn.Module.__dict__["train"] is ORIGINAL, "the wrapper goes with the last strategy"
print("ok")
'''


def test_mode_switches_inside_run_are_once_for_all_replicas(fresh):
    assert "ok" in fresh(PROGRAM).stdout


PEFT_PROGRAM = r'''
import gc, sys, torch, multidev as md
from multidev.integrations.peft import SWITCHES
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
import peft   # imported after the strategy: wrapped at the next scope entry
methods = lambda: [getattr(sys.modules[m], c).__dict__[name] for m, c, name in SWITCHES]
ORIGINALS = methods()
assert not any(hasattr(m, "_multidev_wrapped") for m in ORIGINALS)
with strategy.scope():
    pass
assert all(m._multidev_wrapped for m in methods())
del strategy
gc.collect(); gc.collect()
assert all(m is o for m, o in zip(methods(), ORIGINALS)), "the wrappers go with the last strategy"
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])   # peft imported: wrapped at once
assert all(m._multidev_wrapped for m in methods())

# The switches inside strategy.run, a slow layer, slower on replica 0 (the replicas' passes overlap): each pass
# sees the adapters its replica chose, as each DDP rank would.
import time
from peft import LoraConfig, get_peft_model

class Slow(torch.nn.Module):
    def forward(self, x):
        time.sleep(0.05 if md.distribute.get_replica_context().replica_id_in_sync_group == 0 else 0.02)
        return x

lora = lambda: LoraConfig(r=2, target_modules=["0", "2"], init_lora_weights=False)   # B not zero
with strategy.scope():
    torch.manual_seed(0)
    model = get_peft_model(torch.nn.Sequential(torch.nn.Linear(3, 3), Slow(), torch.nn.Linear(3, 2)), lora())
    model.add_adapter("other", lora())
x = torch.ones(1, 3)
with torch.no_grad():
    adapted = model(x)
    with model.disable_adapter():
        base = model(x)
    model.set_adapter("other")
    other = model(x)
    model.set_adapter("default")
assert not torch.equal(adapted, base) and not torch.equal(adapted, other)

def passes(x):
    with torch.no_grad():
        with model.disable_adapter():
            b = model(x)
        first = model(x)
        model.set_adapter("other")
        o = model(x)
        model.set_adapter("default")
        return b, first, o, model(x)

for _ in range(2):
    results = strategy.run(passes, args=(x,))
    for r in range(2):
        got = [t.values[r] for t in results]
        assert [torch.equal(g, w) for g, w in zip(got, (base, adapted, other, adapted))] == [True] * 4, (r, got)
print("ok")
'''


def test_peft_switch_wrapped_while_strategies_live(fresh):
    """peft's adapter switches (``disable_adapter()``'s, ``set_adapter``'s) are wrapped while a strategy
    lives, once peft is imported (and peft's own again after): inside ``strategy.run`` each replica's
    pass sees the adapters it chose, timing forced (their effect on training: ``test_hf_models2.py``)."""
    pytest.importorskip("peft", reason="peft is not installed (pip install peft)")
    assert "ok" in fresh(PEFT_PROGRAM).stdout
