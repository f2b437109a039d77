"""``torch.save(model, path)`` of a module built in a strategy's scope (pytorch/examples' super_resolution
checkpoint, and many scripts): each parameter and buffer pickles as the plain tensor ``state_dict()`` gives
(the one set of weights; a running statistic's mean over the replicas), so the file loads with
``torch.load(path, weights_only=False)`` in a process without multidev, as DDP's ``torch.save(model.module,
path)`` does: plain dicts and ``Parameter``s, tied weights still one. Before, the distributed variables
refused to pickle. An ``md.Variable`` (TensorFlow's, distributed or not) is still refused, and
``copy.deepcopy(model)`` in the scope still makes new distributed variables.
"""

from __future__ import annotations

PROGRAM = r'''
import copy, io, pickle, subprocess, sys
import torch, multidev as md
md.config.set_logical_device_configuration(md.config.list_physical_devices("CPU")[0],
                                           [md.config.LogicalDeviceConfiguration()] * 2)
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5)).double()
    model[1].weight = model[0].weight                      # tied, as word_language_model ties them
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
strategy.run(step, args=(md.distribute.PerReplica((torch.tensor([0, 1, 2]), torch.tensor([3, 4, 1]))),))
stats = strategy.experimental_local_results(model[2].running_mean)
assert not torch.equal(stats[0], stats[1]), "each replica's own statistics"
path, expected = sys.argv[1], sys.argv[2]
torch.save(model, path)
torch.save(model.state_dict(), expected)
assert torch.equal(model.state_dict()["2.running_mean"], (stats[0] + stats[1]) / 2)
LOAD = """
import sys, torch
model = torch.load(sys.argv[1], weights_only=False)
expected = torch.load(sys.argv[2], weights_only=True)
assert "multidev" not in sys.modules
assert model.state_dict().keys() == expected.keys()
assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())
assert model[1].weight is model[0].weight, "tied weights stay one"
assert type(model[0]._parameters) is dict and type(model[2]._buffers) is dict
assert type(model[0].weight) is torch.nn.Parameter and type(model[2].running_mean) is torch.Tensor
print("LOADED")
"""
loaded = subprocess.run([sys.executable, "-c", LOAD, path, expected], capture_output=True, text=True)
assert loaded.stdout.strip() == "LOADED", loaded.stdout + loaded.stderr
plain = md.Variable(1.0)
with strategy.scope():
    mirrored = md.Variable(1.0)
    twin = copy.deepcopy(model)
assert isinstance(mirrored, md.distribute.DistributedValues)
for variable in (plain, mirrored):
    try:
        pickle.dumps(variable)
    except TypeError as err:
        assert "not picklable" in str(err)
    else:
        raise AssertionError(f"pickled {variable!r}")
assert isinstance(twin[0].weight, md.distribute.DistributedValues) and twin[0].weight is not model[0].weight
assert twin[1].weight is twin[0].weight
assert type(twin[0]._parameters) is type(model[0]._parameters)
print("OK")
'''


def test_torch_save_of_a_module_built_in_the_scope_loads_without_multidev(fresh, tmp_path):
    proc = fresh(PROGRAM.replace("sys.argv[1], sys.argv[2]", f"{str(tmp_path / 'm.pt')!r}, {str(tmp_path / 'sd.pt')!r}"))
    assert proc.stdout.strip().endswith("OK"), proc.stdout
