"""peft's adapter switches inside ``strategy.run`` (``integrations/peft.py`` over
``distribute/replica_switches.py``): ``disable_adapter()`` and ``set_adapter`` run once with every
replica paused, so each replica's passes see the adapters its DDP rank's would, whatever the threads'
timing; the wrappers live with the strategies. (``model.eval()`` / ``model.train()`` in the step are kept
per replica instead: ``replica_attributes``, ``tests/distribute/test_replica_attributes.py``.)

One fresh interpreter (device configuration is per process); skipped without peft.
"""

from __future__ import annotations

import pytest

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

# A switch only some replicas make is refused at once, naming it; nothing switched.
def replica_0_switches(x):
    if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
        model.set_adapter("other")
    return x
try:
    strategy.run(replica_0_switches, args=(x,))
except md.errors.AbortedError as e:
    assert "merge_call(PeftModel.set_adapter)" in str(e), e
else:
    raise AssertionError("a switch made by one replica alone passed")
assert model.active_adapter == "default"
with torch.no_grad():
    assert torch.equal(model(x), adapted)
print("ok")
'''


def test_peft_switch_wrapped_while_strategies_live(fresh):
    """peft's adapter switches (``disable_adapter()``'s, ``set_adapter``'s) are wrapped while a strategy
    lives, once peft is imported (and peft's own again after): inside ``strategy.run`` each replica's
    pass sees the adapters it chose, timing forced; a switch only one replica makes is refused (their
    effect on training: ``test_hf_models2.py``)."""
    pytest.importorskip("peft", reason="peft is not installed (pip install peft)")
    assert "ok" in fresh(PEFT_PROGRAM).stdout
