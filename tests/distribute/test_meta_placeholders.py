"""Models built on the meta device in ``strategy.scope()`` and given their values afterwards, as
Hugging Face's ``from_pretrained`` builds them (``torch.device("meta")``, then ``setattr`` of each
loaded ``Parameter`` marked ``_is_hf_initialized``), and as ``load_state_dict(assign=True)`` fills
them: each trains as one device on the global batch (float64), and the attributes a library set on
the tensor it registered stay readable on its variable and on each replica's copy (DDP keeps the
one Parameter). ``Module.to_empty()``, which writes the parameter dict without torch's registration
hooks, is refused with the fix at the first forward in ``strategy.run``, before any update.

Before: the meta placeholder raised torch's "Cannot copy out of meta tensor" in the scope, and a
loaded weight lost its ``_is_hf_initialized`` mark, so ``from_pretrained`` in the scope re-initialised
every loaded weight at random (tests/programs/test_hf_models.py runs transformers itself).
"""

from __future__ import annotations

PROGRAM = r'''
import torch, multidev as md
from torch import nn
torch.set_default_dtype(torch.float64)

cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
halves = lambda t: md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))
g = torch.Generator().manual_seed(0)
X, Y = torch.randn(3, 8, 5, generator=g), torch.randn(3, 8, 2, generator=g)

torch.manual_seed(1)
reference = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))
saved = {k: v.clone() for k, v in reference.state_dict().items()}


def meta_model():
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))


def load_like_from_pretrained(model):
    """transformers' set_param_for_module: a marked Parameter per loaded tensor, given with setattr."""
    for key, value in saved.items():
        module_path, _, name = key.rpartition(".")
        param = nn.Parameter(value.clone())
        param._is_hf_initialized = True
        setattr(model.get_submodule(module_path), name, param)


def train(model, opt, on_replicas, seen=None):
    def step(x, y):
        if seen is not None:
            seen.append(getattr(model[0].weight, "_is_hf_initialized", None))
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for x, y in zip(X, Y):
        strategy.run(step, args=(halves(x), halves(y))) if on_replicas else step(x, y)


want = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))
want.load_state_dict(saved)
train(want, torch.optim.AdamW(want.parameters(), lr=0.05), on_replicas=False)


def check(model):
    for (name, p), w in zip(model.named_parameters(), want.parameters()):
        assert isinstance(p, md.distribute.DistributedValues), (name, type(p))
        for c in p.values:
            torch.testing.assert_close(c.detach(), w.detach(), rtol=0, atol=1e-13, msg=name)


# --- from_pretrained's way: meta placeholders, then setattr of marked Parameters ------------------------
with strategy.scope():
    model = meta_model()
    load_like_from_pretrained(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
assert all(p._is_hf_initialized is True for p in model.parameters())   # the mark the loader reads back
seen = []
train(model, opt, on_replicas=True, seen=seen)
assert seen == [True] * 6, seen   # inside strategy.run: each replica's copy carries it
check(model)

# --- load_state_dict(assign=True) over meta placeholders --------------------------------------------------
with strategy.scope():
    model = meta_model()
    model.load_state_dict(saved, assign=True)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
train(model, opt, on_replicas=True)
check(model)

# --- to_empty() bypasses the registration hooks: refused at the first forward, before any update ---------
with strategy.scope():
    model = meta_model()
    model.to_empty(device="cpu")
    model.load_state_dict(saved)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
try:
    train(model, opt, on_replicas=True)
except ValueError as err:
    message = str(err)
else:
    raise AssertionError("to_empty() after a meta build in the scope trained with shared parameters")
for needle in ("Linear (parameters ['weight', 'bias'])", "meta device", "Module.to_empty()", "setattr",
               "load_state_dict(state_dict, assign=True)"):
    assert needle in message, (needle, message)
assert all(torch.equal(p, saved[k]) for k, p in model.state_dict().items()), "no update before the refusal"
print("OK")
'''


def test_meta_placeholders_filled_in_scope_train_as_one_device(fresh):
    proc = fresh(PROGRAM, timeout=120)
    assert proc.stdout.strip().endswith("OK"), proc.stdout
