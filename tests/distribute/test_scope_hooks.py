"""torch hooks owned by live strategies: ``import multidev`` registers nothing in torch; a strategy
installs what it needs while it lives and the last one freed removes it (``distribute/live_hooks.py``)."""

from __future__ import annotations

import threading

import torch

from multidev.distribute import live_hooks

# What torch's registries and patched functions look like; printed by the fresh interpreters below.
_PROBE = """
import gc, importlib
import torch
from torch.nn.modules import module as M
from torch.optim import optimizer as O, lr_scheduler
from torch.nn.utils import parametrize

NORM = importlib.import_module("torch.nn.utils.weight_norm").WeightNorm
MODULE_METHODS = {n: M.Module.__dict__[n] for n in ("__getattr__", "__setattr__", "__delattr__")}
ORIGINALS = (parametrize.register_parametrization, NORM.__dict__["apply"],
             {c: c.__dict__["step"] for c in vars(lr_scheduler).values() if isinstance(c, type) and "step" in c.__dict__})
REGISTRIES = [(O, "_global_optimizer_pre_hooks"), (O, "_global_optimizer_post_hooks"),
              (M, "_global_parameter_registration_hooks"), (M, "_global_buffer_registration_hooks"),
              (M, "_global_module_registration_hooks"), (M, "_global_forward_pre_hooks")]

def registered():
    return {name: len(getattr(mod, name)) for mod, name in REGISTRIES if getattr(mod, name)}

def torch_functions_are_torchs():
    return (parametrize.register_parametrization is ORIGINALS[0] and NORM.__dict__["apply"] is ORIGINALS[1]
            and all(c.__dict__["step"] is step for c, step in ORIGINALS[2].items())
            and all(M.Module.__dict__[n] is f for n, f in MODULE_METHODS.items()))

def collect():   # twice: a layer's weak-keyed entry lets go of its strategy when the layer is collected
    gc.collect()
    gc.collect()

def assert_clean(when):
    assert registered() == {} and torch_functions_are_torchs(), (when, registered(), torch_functions_are_torchs())
"""


def test_hooks_live_with_the_strategies(fresh):
    fresh(_PROBE + """
import multidev as md
import multidev.integrations
assert "keras" not in __import__("sys").modules
assert_clean("after import")
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)

def train(strategy):
    torch.manual_seed(0)
    with strategy.scope():
        model = torch.nn.Linear(3, 1).double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        schedule = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    x = torch.arange(12, dtype=torch.float64).reshape(4, 3) / 10
    y = torch.ones(4, 1, dtype=torch.float64)
    def step(a, b):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(a), b).backward()
        optimizer.step()
        schedule.step()
    batches = md.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat(2)
    for a, b in strategy.experimental_distribute_dataset(batches):
        strategy.run(step, args=(a, b))
    return model, optimizer

def one_device():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    x = torch.arange(12, dtype=torch.float64).reshape(4, 3) / 10
    for _ in range(2):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), torch.ones(4, 1, dtype=torch.float64)).backward()
        optimizer.step()
        schedule.step()
    return model

reference = one_device()   # no strategy: torch as torch is
assert_clean("after a plain torch loop")

# a deferred restore registers hooks while a value waits for its variable
import os, tempfile
from multidev.distribute import live_hooks
saved = md.keras.Sequential([md.keras.layers.Dense(2)])
saved(torch.ones(1, 3))
path = md.train.Checkpoint(model=saved).save(os.path.join(tempfile.mkdtemp(), "ckpt"))
unbuilt = md.keras.Sequential([md.keras.layers.Dense(2)])
status = md.train.Checkpoint(model=unbuilt).restore(path)
assert registered() == {"_global_parameter_registration_hooks": 1, "_global_buffer_registration_hooks": 1}
unbuilt(torch.ones(1, 3))   # the kernel is created: its value lands, nothing waits any more
status.assert_consumed()
assert torch.equal(unbuilt.layers[0].kernel.detach(), saved.layers[0].kernel.detach())
live_hooks.sweep()          # (the hook that took the last value ran inside torch's loop: removed here)
assert_clean("after a deferred restore")

strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert set(registered()) == {"_global_optimizer_pre_hooks", "_global_optimizer_post_hooks",
    "_global_parameter_registration_hooks", "_global_buffer_registration_hooks",
    "_global_module_registration_hooks"}, registered()
assert not torch_functions_are_torchs()
model, optimizer = train(strategy)
assert isinstance(model.weight, md.distribute.MirroredVariable)
other = md.distribute.OneDeviceStrategy("/cpu:1")
del strategy, model, optimizer
collect()
assert registered() and not torch_functions_are_torchs(), "one strategy still lives: its hooks stay"
del other
collect()
assert_clean("after the last strategy was freed")

strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])   # installs again
model, optimizer = train(strategy)
for mine, ref in zip(model.parameters(), reference.parameters()):
    for copy in mine.values:
        torch.testing.assert_close(copy, ref.detach(), rtol=1e-12, atol=1e-12)
assert optimizer.param_groups[0]["lr"] == 0.1 * 0.5 ** 2     # the schedule stepped once per step
del strategy, model, optimizer, mine, copy                  # (a variable holds its strategy)
collect()
assert_clean("after the second strategy was freed")
print("ok")
""")


def test_keras3_front_end_hooks_live_with_the_strategies(fresh):
    fresh(_PROBE + """
import keras
import multidev as md
from multidev.distribute import front_end
from multidev.integrations import keras3
assert_clean("after import with keras")
assert keras3.FRONT_END in front_end.registered() and isinstance(keras3.FRONT_END, front_end.FrontEnd)
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert registered()["_global_optimizer_pre_hooks"] == 1 and "_global_module_registration_hooks" in registered()
with strategy.scope():
    model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(1)])
assert isinstance(model.layers[0].kernel._value, md.distribute.MirroredVariable)
del strategy, model
collect()
assert_clean("after the strategy was freed")
print("ok")
""", env={"KERAS_BACKEND": "torch"})


def test_owned_hooks_count_owners_from_threads():
    removed = []
    hooks = live_hooks.OwnedHooks("test", [lambda: lambda: removed.append(1)])

    class Owner:
        pass

    owners = [Owner() for _ in range(16)]
    leases = []
    threads = [threading.Thread(target=lambda o=o: leases.append(hooks.acquire(o))) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert hooks.installed and hooks.owners == 16
    for lease in leases[:-1]:
        lease()
        lease()            # a lease releases once
    assert hooks.installed and removed == []
    del owners, leases, threads   # the last owner freed: its finalizer releases it
    assert not hooks.installed and removed == [1]


def test_a_release_inside_torchs_hook_loop_leaves_the_hooks_until_a_sweep():
    """torch iterates the registry while calling its hooks: removing one there would break its loop."""
    class Owner:
        pass

    owner = Owner()
    leases = []

    def on_parameter(module, name, param):
        leases[0]()        # the last owner goes while torch iterates this registry
        return None

    def install():
        handles = [torch.nn.modules.module.register_module_parameter_registration_hook(on_parameter),
                   torch.nn.modules.module.register_module_parameter_registration_hook(lambda *a: None)]
        return lambda: [h.remove() for h in handles]

    hooks = live_hooks.OwnedHooks("test", [install])
    leases.append(hooks.acquire(owner))
    torch.nn.Linear(2, 2)  # would raise "OrderedDict mutated during iteration" if the hooks went here
    assert hooks.installed and hooks.owners == 0
    live_hooks.sweep()
    assert not hooks.installed
    assert on_parameter not in torch.nn.modules.module._global_parameter_registration_hooks.values()
