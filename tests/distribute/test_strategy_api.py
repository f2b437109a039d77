"""Strategy basics through the public API, as the seed notebook uses them."""

import pytest
import torch

import multidev as md

CPUS2 = ["/cpu:0", "/cpu:1"]


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(CPUS2)


def test_seed_run_reduce_gather(strategy):
    res = strategy.run(lambda a, b: a + b, args=(torch.tensor([[1, 2]]), torch.tensor([[3, 4]])))
    assert isinstance(res, md.distribute.PerReplica)
    local = strategy.experimental_local_results(res)
    assert len(local) == 2 and all(torch.equal(t, torch.tensor([[4, 6]])) for t in local)
    assert torch.equal(strategy.gather(res, axis=0), torch.tensor([[4, 6], [4, 6]]))
    assert torch.equal(strategy.reduce("SUM", res, axis=0), torch.tensor([8, 12]))
    assert torch.equal(strategy.reduce(md.distribute.ReduceOp.SUM, res, axis=None), torch.tensor([[8, 12]]))
    assert "PerReplica:{" in repr(res)


def test_num_replicas_and_devices(strategy):
    assert strategy.num_replicas_in_sync == 2
    assert strategy.extended.worker_devices == (
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1",
    )


def test_replica_context_inside_run(strategy):
    def fn():
        ctx = md.distribute.get_replica_context()
        assert not md.distribute.in_cross_replica_context()
        assert md.distribute.get_strategy() is strategy
        return torch.tensor(ctx.replica_id_in_sync_group), ctx.num_replicas_in_sync

    ids, n = strategy.run(fn)
    assert [int(t) for t in strategy.experimental_local_results(ids)] == [0, 1]
    assert n == 2


def test_contexts_outside_and_in_scope(strategy):
    assert not md.distribute.has_strategy()
    default_ctx = md.distribute.get_replica_context()
    assert default_ctx is not None and default_ctx.replica_id_in_sync_group == 0
    assert md.distribute.get_strategy().num_replicas_in_sync == 1
    with strategy.scope():
        assert md.distribute.has_strategy()
        assert md.distribute.in_cross_replica_context()
        assert md.distribute.get_replica_context() is None
        assert md.distribute.get_strategy() is strategy
        with strategy.scope():  # re-entrant
            assert md.distribute.get_strategy() is strategy
    assert not md.distribute.has_strategy()


def test_mixing_strategies_raises(strategy):
    other = md.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        with pytest.raises(RuntimeError, match="Mixing different"):
            with other.scope():
                pass


def test_reduce_mean_with_axis_divides_by_true_count(strategy):
    values = md.distribute.PerReplica((torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0])))
    assert strategy.reduce("MEAN", values, axis=0).item() == pytest.approx(16.0 / 4)
    assert strategy.reduce("SUM", values, axis=0).item() == pytest.approx(16.0)


def test_reduce_mean_elementwise(strategy):
    values = md.distribute.PerReplica((torch.tensor([1.0, 3.0]), torch.tensor([3.0, 5.0])))
    assert torch.allclose(strategy.reduce("MEAN", values, axis=None), torch.tensor([2.0, 4.0]))


def test_reduce_non_distributed(strategy):
    with pytest.raises(ValueError, match="non-distributed value"):
        strategy.reduce("SUM", torch.tensor(3.0), axis=None)
    assert strategy.reduce("MEAN", torch.tensor(3.0), axis=None).item() == 3.0


def test_reduce_bad_op(strategy):
    with pytest.raises(ValueError, match="Unsupported reduce op 'MAX'"):
        strategy.reduce("MAX", md.distribute.PerReplica((torch.tensor(1.0), torch.tensor(2.0))), axis=None)


def test_gather_uneven_and_mismatched(strategy):
    values = md.distribute.PerReplica((torch.ones(3, 2), torch.zeros(1, 2)))
    assert strategy.gather(values, axis=0).shape == (4, 2)
    bad = md.distribute.PerReplica((torch.ones(3, 2), torch.zeros(3, 5)))
    with pytest.raises(ValueError, match="differ outside axis 0"):
        strategy.gather(bad, axis=0)


def test_values_from_function(strategy):
    def value_fn(ctx):
        return torch.tensor(ctx.replica_id_in_sync_group * 10 + ctx.num_replicas_in_sync)

    values = strategy.experimental_distribute_values_from_function(value_fn)
    assert [int(v) for v in strategy.experimental_local_results(values)] == [2, 12]
    doubled = strategy.run(lambda v: v * 2, args=(values,))
    assert [int(v) for v in strategy.experimental_local_results(doubled)] == [4, 24]


def test_run_bad_args(strategy):
    with pytest.raises(TypeError, match=r"args must be a tuple or list.*args=\(x,\)"):
        strategy.run(lambda x: x, args=torch.ones(2))
    with pytest.raises(TypeError, match="needs a callable"):
        strategy.run(3)


def test_run_inside_run_raises(strategy):
    def outer():
        strategy.run(lambda: None)

    with pytest.raises(RuntimeError, match="cannot be called inside a replica function"):
        strategy.run(outer)


def test_nested_structures_roundtrip(strategy):
    def fn(batch):
        return {"ids": batch["ids"] + 1, "n": len(batch["ids"])}

    batch = md.distribute.PerReplica(({"ids": torch.arange(2)}, {"ids": torch.arange(3)}))
    out = strategy.run(fn, args=(batch,))
    ids = strategy.experimental_local_results(out["ids"])
    assert [t.tolist() for t in ids] == [[1, 2], [1, 2, 3]]
    assert strategy.experimental_local_results(out["n"]) == (2, 3)


def test_one_device_strategy_returns_plain_values():
    s = md.distribute.OneDeviceStrategy("/cpu:0")
    out = s.run(lambda x: x * 2, args=(torch.ones(2),))
    assert isinstance(out, torch.Tensor) and torch.equal(out, torch.full((2,), 2.0))
    with s.scope():
        v = md.Variable(1.0)
        layer = torch.nn.Linear(2, 2)
    assert type(v) is md.Variable
    assert type(layer.weight) is torch.nn.Parameter
    assert s.reduce("SUM", out, axis=None).tolist() == [2.0, 2.0]


def test_default_mirrored_uses_every_logical_cpu_without_gpus():
    s = md.distribute.MirroredStrategy()   # conftest split the CPU in 4; TF 2.21 uses every logical CPU
    cpus = md.config.list_logical_devices("CPU")
    assert s.extended.worker_devices == tuple(f"/job:localhost/replica:0/task:0/device:CPU:{i}"
                                              for i in range(len(cpus)))


def test_logical_devices_are_accepted_as_devices():
    # the GPU guide: strategy = tf.distribute.MirroredStrategy(tf.config.list_logical_devices('GPU'))
    strategy = md.distribute.MirroredStrategy(md.config.list_logical_devices("CPU")[:2])
    assert strategy.extended.worker_devices == tuple(f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2))


def test_duplicate_and_bad_devices():
    with pytest.raises(ValueError, match="No duplicates allowed"):
        md.distribute.MirroredStrategy(["/cpu:0", "/CPU:0"])
    with pytest.raises(TypeError, match="must be a list of device names"):
        md.distribute.MirroredStrategy("/cpu:0")
    with pytest.raises(ValueError, match="non-empty"):
        md.distribute.MirroredStrategy([])


def test_strategy_threads_are_persistent(strategy):
    import threading

    strategy.run(lambda: None)
    before = {t.ident for t in threading.enumerate()}
    for _ in range(5):
        strategy.run(lambda: None)
    after = {t.ident for t in threading.enumerate()}
    assert after <= before   # no thread made per run (threads of earlier tests' strategies may end meanwhile)


def test_every_replica_runs_under_the_callers_grad_and_autocast_modes():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def fn():
        x = torch.ones(2, 2, requires_grad=True)
        return torch.tensor([float(torch.is_grad_enabled()), float((x @ x).dtype == torch.bfloat16)])

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        inside = strategy.experimental_local_results(strategy.run(fn))
    outside = strategy.experimental_local_results(strategy.run(fn))
    assert all(v.tolist() == [0.0, 1.0] for v in inside)
    assert all(v.tolist() == [1.0, 0.0] for v in outside)


def test_replicas_run_under_the_callers_device_policy():
    """The caller's md.config.experimental.set_device_policy reaches every replica thread (and no further)."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    seen = []
    record = lambda: seen.append(md.config.experimental.get_device_policy())  # noqa: E731
    md.config.experimental.set_device_policy("explicit")
    try:
        strategy.run(record)
    finally:
        md.config.experimental.set_device_policy(None)
    assert seen == ["explicit", "explicit"]
    seen.clear()
    strategy.run(record)
    assert seen == ["silent", "silent"]
