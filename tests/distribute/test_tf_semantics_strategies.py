"""Issue 17 items 4-7 and 9: strategy defaults, run results, CentralStorage, MEAN of ints, error types (TF 2.21)."""

import json

import pytest
import torch

import multidev as md


@pytest.fixture(scope="module")
def two():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _replica_id():
    return md.distribute.get_replica_context().replica_id_in_sync_group


# --- item 4: default devices -------------------------------------------------------------------
DEFAULTS = """
import json, multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
print("RESULT " + json.dumps({
    "mirrored": md.distribute.MirroredStrategy().num_replicas_in_sync,
    "central": md.distribute.experimental.CentralStorageStrategy().num_replicas_in_sync,
    "mwms": md.distribute.MultiWorkerMirroredStrategy().num_replicas_in_sync}))
"""


def _result(proc):
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])


def test_default_devices_follow_tensorflow(fresh):
    """TF 2.21 after splitting the CPU in two: MirroredStrategy() 2 replicas, MWMS() without a cluster 1."""
    got = _result(fresh(DEFAULTS, env={"TF_CONFIG": ""}))
    assert got == {"mirrored": 2, "central": 1, "mwms": 1}


def test_multi_worker_strategy_keeps_configured_devices_per_worker(fresh):
    got = _result(fresh(DEFAULTS.replace("md.config.set_logical_device_configuration(cpu, "
                                         "[md.config.LogicalDeviceConfiguration()] * 2)", ""),
                        env={"TF_CONFIG": "", "MULTIDEV_DEVICES_PER_WORKER": "2"}))
    assert got["mwms"] == 2 and got["mirrored"] == 2   # `multidev launch --devices-per-worker 2`


# --- item 5 (revised by issue 25, as TF 2.21): run returns the variable itself; a write's result per replica ---
def test_run_returning_a_variable_gives_the_variable(two):
    with two.scope():
        v = md.Variable(1.0, aggregation=md.VariableAggregation.SUM)
    assert isinstance(v, md.distribute.DistributedValues)
    assert isinstance(md.distribute.PerReplica([1, 2]), md.distribute.DistributedValues)
    assert not isinstance(torch.ones(1), md.distribute.DistributedValues)
    assert two.run(lambda: v) is v
    added = two.run(lambda: v.assign_add(md.constant(1.0)))   # a tensor per replica: SUM adds both
    assert isinstance(added, md.distribute.PerReplica)
    assert not any(isinstance(t, md.Variable) for t in two.experimental_local_results(added))
    assert [float(t) for t in two.experimental_local_results(added)] == [3.0, 3.0]   # 1 + (1 + 1)


def test_run_returning_a_sync_on_read_variable_gives_per_replica_values(two):
    with two.scope():
        v = md.Variable(0.0, synchronization=md.VariableSynchronization.ON_READ,
                        aggregation=md.VariableAggregation.SUM)
    out = two.run(lambda: v.assign_add(float(_replica_id() + 1)))
    assert isinstance(out, md.distribute.PerReplica)
    assert [float(t) for t in two.experimental_local_results(out)] == [1.0, 2.0]


# --- item 6: CentralStorageStrategy keeps one copy ----------------------------------------------
@pytest.fixture(scope="module")
def central():
    return md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])


def test_central_storage_keeps_one_copy_on_the_parameter_device(central):
    with central.scope():
        v = md.Variable([1.0, 2.0], aggregation=md.VariableAggregation.SUM)
        layer = torch.nn.Linear(2, 1)
    assert central.extended.parameter_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    for var in (v, layer.weight):
        local = central.experimental_local_results(var)
        assert len(local) == 1 and local[0] is var   # TF: (v,), one variable
        assert var.device == torch.device("cpu")
    # Every replica reads that one storage (logical CPUs share the parameter device's memory).
    pointers = central.run(lambda: torch.tensor(layer.weight.data_ptr()))
    assert [int(p) for p in central.experimental_local_results(pointers)] == [layer.weight.data_ptr()] * 2


def test_central_storage_aggregates_replica_writes_once(central):
    with central.scope():
        total = md.Variable(1.0, aggregation=md.VariableAggregation.SUM)
        plain = md.Variable(1.0)   # aggregation NONE
    central.run(lambda: total.assign_add(md.constant(1.0)))
    assert float(total) == 3.0   # the replicas' 1 + 1, added once
    with pytest.raises(ValueError, match="non-DistributedValues value 1.0"):   # one constant: TF refuses SUM
        central.run(lambda: total.assign_add(1.0))
    with pytest.raises(ValueError, match="aggregation method"):
        central.run(lambda: plain.assign_add(1.0))
    plain.assign_add(1.0)   # cross-replica context: fine
    assert float(plain) == 2.0


def test_central_storage_gradients_land_on_the_one_copy(central):
    torch.manual_seed(0)
    with central.scope():
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 1)
    x, y = torch.randn(4, 3), torch.randn(4, 1)

    def step(xb, yb):
        opt.zero_grad()
        md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=4).backward()
        opt.step()

    central.run(step, args=(md.distribute.PerReplica((x[:2], x[2:])), md.distribute.PerReplica((y[:2], y[2:]))))
    ((ref(x) - y) ** 2).sum(1).mean().backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= 0.5 * p.grad
    for p, e in zip(model.parameters(), ref.parameters()):
        (only,) = central.experimental_local_results(p)
        torch.testing.assert_close(only.detach(), e.detach(), rtol=1e-5, atol=1e-6)


# --- item 7: MEAN of integers -------------------------------------------------------------------
def test_reduce_mean_of_integer_replica_ids_divides_as_tensorflow(two):
    ids = two.run(lambda: torch.tensor(_replica_id(), dtype=torch.int32))
    mean = two.reduce("MEAN", ids, axis=None)
    assert mean.item() == 0.5 and mean.dtype == torch.float64   # TF: int32 / int -> float64
    assert two.reduce("SUM", ids, axis=None).dtype == torch.int32
    small = two.run(lambda: torch.tensor([_replica_id()], dtype=torch.int8))
    assert two.reduce("MEAN", small, axis=None).dtype == torch.float32
    assert two.reduce("MEAN", small, axis=0).item() == 0.5


# --- item 9: error types ------------------------------------------------------------------------
def test_entering_a_second_strategys_scope_raises_runtime_error(two):
    other = md.distribute.MirroredStrategy(["/cpu:0"])
    with two.scope():
        with pytest.raises(RuntimeError, match="Mixing different"):
            with other.scope():
                pass


def test_unknown_device_without_soft_placement_raises_invalid_argument():
    md.config.set_soft_device_placement(False)
    try:
        with pytest.raises(md.errors.InvalidArgumentError, match="device:GPU:7 unknown device"):
            with md.device("/device:GPU:7"):
                torch.ones(1)
    finally:
        md.config.set_soft_device_placement(True)
    assert not issubclass(md.errors.InvalidArgumentError, RuntimeError)   # as TF's OpError subclasses


def test_cpu_memory_info_is_zeros_as_tensorflow():
    assert md.config.experimental.get_memory_info("CPU:0") == {"current": 0, "peak": 0}
    assert md.config.experimental.reset_memory_stats("CPU:0") is None
    with pytest.raises(ValueError, match="GPU:5"):
        md.config.experimental.get_memory_info("GPU:5")


# --- cross-replica results are values (TF 2.21: a tape's gradient through reduce/gather is None) ---
@pytest.mark.parametrize("replicas", [1, 2])
def test_reduce_and_gather_results_are_values_as_in_tensorflow(replicas):
    """The custom-training tutorial as printed: ``total_loss += distributed_train_step(x)`` then
    ``loss.numpy()``; the replicas' losses require grad, the reduced value does not (TF's gradient
    through ``strategy.reduce``/``gather``, with a tape watching, is None)."""
    strategy = md.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    with strategy.scope():
        w = md.Variable(2.0)

    def step(x):
        return md.reshape(w * x, [1])

    x = torch.tensor(3.0)
    total_loss = 0.0
    for _ in range(2):
        per_replica = strategy.run(step, args=(x,))
        assert all(t.requires_grad for t in strategy.experimental_local_results(per_replica))
        total_loss += strategy.reduce(md.distribute.ReduceOp.SUM, per_replica, axis=None)
    assert total_loss.grad_fn is None and not total_loss.requires_grad
    assert total_loss.numpy() == pytest.approx(12.0 * replicas)
    for reduced in (strategy.reduce("MEAN", per_replica, axis=0), strategy.gather(per_replica, axis=0),
                    strategy.reduce("SUM", {"a": per_replica}, axis=None)["a"]):
        assert not reduced.requires_grad
        reduced.numpy()
