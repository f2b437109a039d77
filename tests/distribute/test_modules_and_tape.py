"""torch.nn.Modules under a strategy, GradientTape, md.function and md.nn helpers."""

import pytest
import torch

import multidev as md
from multidev.distribute.replica_update import local_copy
from multidev.distribute.optimizer_hooks import replica_optimizer

PR = md.distribute.PerReplica


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def test_module_outside_scope_untouched(strategy):
    layer = torch.nn.Linear(3, 2)
    assert type(layer.weight) is torch.nn.Parameter
    assert type(layer._parameters) is dict


def test_module_in_scope_is_mirrored_and_initialised_from_replica_0(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(3, 2)
    assert isinstance(layer.weight, md.distribute.MirroredVariable)
    strategy.run(lambda: None)  # first run copies the initialised primary to every replica
    w0, w1 = layer.weight.values
    assert torch.equal(w0, w1) and w0.data_ptr() != w1.data_ptr()
    assert w0.data_ptr() == layer.weight.data_ptr()  # replica 0's copy is the variable's storage
    names = [n for n, _ in layer.named_parameters()]
    assert names == ["weight", "bias"]


def test_replica_sees_its_own_component(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(2, 1)
    strategy.run(lambda: None)

    def fn():
        return layer.weight.data_ptr()

    ptrs = strategy.experimental_local_results(strategy.run(fn))
    assert ptrs == tuple(c.data_ptr() for c in layer.weight.values)


def test_load_state_dict_reaches_every_replica(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(2, 1)
    state = {"weight": torch.tensor([[1.0, 2.0]]), "bias": torch.tensor([3.0])}
    layer.load_state_dict(state)
    out = strategy.run(lambda x: layer(x), args=(torch.ones(1, 2),))
    assert [t.item() for t in strategy.experimental_local_results(out)] == [6.0, 6.0]
    saved = layer.state_dict()
    assert type(saved["weight"]) is torch.Tensor and torch.equal(saved["weight"], state["weight"])


def test_batchnorm_statistics_are_per_replica_and_averaged_on_read(strategy):
    with strategy.scope():
        bn = torch.nn.BatchNorm1d(1, momentum=1.0)  # running stats = last batch's stats
    assert isinstance(bn.running_mean, md.distribute.SyncOnReadVariable)
    batches = PR((torch.full((4, 1), 1.0), torch.full((4, 1), 3.0)))
    strategy.run(lambda x: bn(x), args=(batches,))
    assert [c.item() for c in bn.running_mean.values] == [1.0, 3.0]
    assert bn.state_dict()["running_mean"].item() == 2.0


def test_optimizer_step_in_cross_replica_context_raises(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="cross-replica context.*strategy.run"):
        opt.step()


def test_optimizer_state_dict_is_replica_0s(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(2, 1)
        opt = torch.optim.Adam(layer.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        layer(x).sum().backward()
        opt.step()

    strategy.run(step, args=(PR((torch.ones(1, 2), torch.ones(1, 2) * 2)),))
    state = opt.state_dict()["state"]
    assert set(state) == {0, 1} and float(state[0]["step"]) == 1.0
    m0 = opt.state[layer.weight]["exp_avg"]
    assert m0.shape == (1, 2)


def test_gradient_tape_with_distributed_variables(strategy):
    with strategy.scope():
        v = md.Variable(2.0)

    def fn(x):
        with md.GradientTape() as tape:
            y = v * v * x
        return tape.gradient(y, v)

    grads = strategy.run(fn, args=(PR((torch.tensor(1.0), torch.tensor(3.0))),))
    assert [g.item() for g in strategy.experimental_local_results(grads)] == [4.0, 12.0]


def test_gradient_tape_basics():
    x = torch.tensor(3.0)
    with md.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert tape.gradient(y, x).item() == 6.0
    assert tape.gradient(z, x).item() == 108.0
    w = md.Variable([1.0, 2.0])
    unused = md.Variable(1.0)
    with md.GradientTape() as tape2:
        loss = (w * w).sum()
    grads = tape2.gradient(loss, {"w": w, "unused": unused})
    assert grads["w"].tolist() == [2.0, 4.0] and grads["unused"] is None
    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        tape2.gradient(loss, w)
    with md.GradientTape() as tape3:
        loss = w.sum()
    zero = tape3.gradient(loss, [w, unused], unconnected_gradients="zero")
    assert zero[1].item() == 0.0


def test_function_decorator():
    @md.function
    def add(a, b):
        return a + b

    assert add(torch.tensor(1), torch.tensor(2)).item() == 3
    assert add.python_function(1, 2) == 3
    with pytest.raises(TypeError, match="decorates a callable"):
        md.function(3)


def test_compute_average_loss(strategy):
    per_example = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert md.nn.compute_average_loss(per_example).item() == 2.5
    assert md.nn.compute_average_loss(per_example, global_batch_size=8).item() == 1.25
    assert md.nn.compute_average_loss(per_example, sample_weight=torch.tensor([1.0, 0, 0, 0])).item() == 0.25
    assert md.nn.compute_average_loss(torch.zeros(0), global_batch_size=0).item() == 0.0
    with pytest.raises(ValueError, match="at least rank 1"):
        md.nn.compute_average_loss(torch.tensor(1.0))
    out = strategy.run(lambda: md.nn.compute_average_loss(torch.ones(2)))  # 2 per replica x 2 replicas
    assert all(t.item() == 0.5 for t in strategy.experimental_local_results(out))
    out = strategy.run(lambda: md.nn.scale_regularization_loss(torch.tensor(4.0)))
    assert all(t.item() == 2.0 for t in strategy.experimental_local_results(out))


def test_cross_device_ops_direct():
    ops = md.distribute.ReductionToOneDevice()
    per = PR((torch.tensor([1.0]), torch.tensor([3.0])))
    assert ops.reduce("MEAN", per, "/cpu:0").item() == 2.0
    assert [t.item() for t in ops.batch_reduce("SUM", [(per, "/cpu:0")])] == [4.0]
    mirrored = ops.broadcast(torch.tensor(5.0), ["/cpu:0", "/cpu:1"])
    assert isinstance(mirrored, md.distribute.Mirrored) and [t.item() for t in mirrored.values] == [5.0, 5.0]
    h = md.distribute.HierarchicalCopyAllReduce()
    s = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"], cross_device_ops=h)
    out = s.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(2)))
    assert all(t.tolist() == [3.0, 3.0] for t in s.experimental_local_results(out))
    with pytest.raises(TypeError, match="cross_device_ops must be"):
        md.distribute.MirroredStrategy(["/cpu:0"], cross_device_ops="nccl")
    with pytest.raises(ValueError, match="num_packs"):
        md.distribute.NcclAllReduce(num_packs=-1)


def test_modules_that_deepcopy_their_layers_train_in_scope(strategy):
    with strategy.scope():
        layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, dropout=0.0)
        encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    first = encoder.layers[0].linear1.weight
    second = encoder.layers[1].linear1.weight
    assert isinstance(second, md.distribute.MirroredVariable) and second is not first
    assert torch.equal(first.values[0], second.values[0])

    def step(x):
        opt.zero_grad()
        encoder(x).pow(2).mean().backward()
        opt.step()

    strategy.run(step, args=(PR((torch.randn(2, 3, 8), torch.randn(2, 3, 8))),))
    for p in encoder.parameters():
        assert torch.equal(p.values[0], p.values[1])


def test_optimizer_state_written_in_cross_replica_context_reaches_every_replica(strategy):
    with strategy.scope():
        layer = torch.nn.Linear(2, 1, bias=False)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad()
        layer(torch.ones(1, 2)).sum().backward()
        opt.step()

    strategy.run(step)
    state = opt.state_dict()
    opt.state[layer.weight] = {"momentum_buffer": torch.full((1, 2), 5.0)}  # cross-replica write
    assert opt.state.setdefault(layer.weight)["momentum_buffer"][0, 0].item() == 5.0
    def replicas_buffer():  # what the calling replica's step reads (its twin's state, its own tensor)
        r = md.distribute.get_replica_context().replica_id_in_sync_group
        return replica_optimizer(opt, r).state[local_copy(layer.weight, r)]["momentum_buffer"].clone()

    buffers = strategy.experimental_local_results(strategy.run(replicas_buffer))
    assert all(torch.equal(b, torch.full((1, 2), 5.0)) for b in buffers)
    opt.load_state_dict(state)
    strategy.run(step)
    assert all(torch.equal(c, layer.weight.values[0]) for c in layer.weight.values)
