"""Replica-context collectives, merge_call, and failures that must not hang."""

import threading

import pytest
import torch

import multidev as md

PR = md.distribute.PerReplica


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])


def _rid():
    return md.distribute.get_replica_context().replica_id_in_sync_group


def test_all_reduce_sum_mean_nested(strategy):
    def fn():
        r = float(_rid())
        ctx = md.distribute.get_replica_context()
        return ctx.all_reduce("SUM", {"a": torch.tensor([r, 1.0]), "b": torch.tensor(r)}), ctx.all_reduce("MEAN", torch.tensor(r))

    summed, mean = strategy.run(fn)
    for d in strategy.experimental_local_results(summed):
        assert torch.equal(d["a"], torch.tensor([3.0, 3.0])) and float(d["b"]) == 3.0
    assert all(float(m) == 1.0 for m in strategy.experimental_local_results(mean))


def test_all_reduce_results_are_private(strategy):
    def fn():
        out = md.distribute.get_replica_context().all_reduce("SUM", torch.ones(2))
        out.add_(_rid())  # must not leak into other replicas' results
        return out

    results = strategy.experimental_local_results(strategy.run(fn))
    assert [t.tolist() for t in results] == [[3.0, 3.0], [4.0, 4.0], [5.0, 5.0]]


def test_all_gather_uneven(strategy):
    def fn():
        r = _rid()
        return md.distribute.get_replica_context().all_gather(torch.full((r + 1, 2), float(r)), axis=0)

    for t in strategy.experimental_local_results(strategy.run(fn)):
        assert t.shape == (6, 2) and t[:, 0].tolist() == [0, 1, 1, 2, 2, 2]


def test_merge_call_sees_per_replica_values(strategy):
    seen = {}

    def merge_fn(s, value, constant):
        seen["in_cross_replica"] = md.distribute.in_cross_replica_context()
        seen["type"] = type(value).__name__
        seen["constant"] = constant
        return s.reduce("SUM", value, axis=None)

    def fn():
        return md.distribute.get_replica_context().merge_call(merge_fn, args=(torch.tensor(float(_rid())), 7))

    out = strategy.run(fn)
    assert seen == {"in_cross_replica": True, "type": "PerReplica", "constant": 7}
    assert float(out) == 3.0 if isinstance(out, torch.Tensor) else all(float(t) == 3.0 for t in strategy.experimental_local_results(out))


def test_replica_exception_reraised_with_replica_id_and_nothing_left_blocked(strategy):
    def fn():
        if _rid() == 1:
            raise KeyError("boom in replica 1")
        md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1))

    with pytest.raises(KeyError, match="boom in replica 1") as info:
        strategy.run(fn)
    assert any("replica 1" in note for note in getattr(info.value, "__notes__", []))
    # The strategy still works afterwards: no replica thread is stuck in the aborted collective.
    out = strategy.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1)))
    assert all(float(t) == 3.0 for t in strategy.experimental_local_results(out))


def test_mismatched_shapes_fail_fast(strategy):
    def fn():
        md.distribute.get_replica_context().all_reduce("SUM", torch.ones(_rid() + 1))

    with pytest.raises(md.errors.InvalidArgumentError, match=r"different collectives.*replica 0.*all_reduce"):
        strategy.run(fn)


def test_different_order_fails_fast(strategy):
    def fn():
        ctx = md.distribute.get_replica_context()
        if _rid() == 0:
            ctx.all_gather(torch.ones(1), axis=0)
        else:
            ctx.all_reduce("SUM", torch.ones(1))

    with pytest.raises(md.errors.InvalidArgumentError, match=r"all_gather.*all_reduce|all_reduce.*all_gather"):
        strategy.run(fn)


def test_replica_skipping_a_collective_fails_fast(strategy):
    def fn():
        if _rid() != 2:
            md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1))

    with pytest.raises(md.errors.AbortedError, match=r"\[2\] returned from the replica function"):
        strategy.run(fn)


def test_replica_threads_are_idle_after_failures(strategy):
    strategy.run(lambda: 0)
    before = {t.ident for t in threading.enumerate()}
    for _ in range(3):
        with pytest.raises(ZeroDivisionError):
            strategy.run(lambda: 1 / 0)
    assert {t.ident for t in threading.enumerate()} <= before  # persistent threads, not one per call
    assert strategy.run(lambda: 5) == 5


def test_all_reduce_is_differentiable(strategy):
    def fn(x):
        x = x.clone().requires_grad_(True)
        total = md.distribute.get_replica_context().all_reduce("SUM", x * x)
        total.sum().backward()
        return x.grad

    xs = md.distribute.PerReplica(tuple(torch.tensor([float(r + 1)]) for r in range(3)))
    grads = strategy.experimental_local_results(strategy.run(fn, args=(xs,)))
    # d/dx_r of sum_s (sum over replicas of x_s^2) summed again over replicas' losses: 3 * 2 x_r
    assert [g.item() for g in grads] == [6.0, 12.0, 18.0]


@pytest.mark.parametrize("op", ["SUM", "MEAN"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_large_all_reduce_splits_work_and_matches_the_sum(strategy, op, dtype):
    """Tensors over COOPERATIVE_MIN_BYTES take the cooperative path (each replica reduces a slice
    of everyone's tensors); uneven length, a non-contiguous input, private results."""
    from multidev.distribute.replica_context import COOPERATIVE_MIN_BYTES

    numel = COOPERATIVE_MIN_BYTES // 4 + 7  # not divisible by 3 replicas

    def value(r):
        return (torch.arange(numel, dtype=torch.int64) % 1000 * (r + 1)).to(dtype)

    def fn():
        r = _rid()
        ctx = md.distribute.get_replica_context()
        strided = torch.stack([value(r), value(r)], 1)[:, 0]  # non-contiguous
        out = ctx.all_reduce(op, {"a": value(r), "b": strided})
        out["a"].add_(r)  # private: must not reach other replicas' results
        return out

    total = value(0) + value(1) + value(2)
    expected = total if op == "SUM" else (total / 3 if dtype.is_floating_point else torch.div(total, 3, rounding_mode="floor"))
    for r, out in enumerate(strategy.experimental_local_results(strategy.run(fn))):
        torch.testing.assert_close(out["a"], expected.to(dtype) + r)
        torch.testing.assert_close(out["b"], expected.to(dtype))


def test_large_all_reduce_is_differentiable(strategy):
    from multidev.distribute.replica_context import COOPERATIVE_MIN_BYTES

    numel = COOPERATIVE_MIN_BYTES // 4

    def fn():
        r = _rid()
        x = torch.full((numel,), float(r + 1), requires_grad=True)
        y = md.distribute.get_replica_context().all_reduce("SUM", x * (r + 1))
        y.sum().backward()
        return x.grad

    # d/dx_r of sum over replicas of sum(all_reduce(x_k * (k + 1))) = 3 * (r + 1)
    for r, g in enumerate(strategy.experimental_local_results(strategy.run(fn))):
        assert torch.equal(g, torch.full((numel,), 3.0 * (r + 1)))


def test_ctrl_c_while_replicas_run_stops_them_and_the_strategy_runs_again(fresh):
    """Every replica runs in its own thread and the caller waits: an interrupt there aborts the
    replicas' collectives, waits for them, re-raises, and leaves the strategy usable."""
    proc = fresh("""
        import os, signal, threading, torch
        import multidev as md
        md.config.set_logical_device_configuration(
            md.config.list_physical_devices("CPU")[0], [md.config.LogicalDeviceConfiguration()] * 2)
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

        def forever():
            ctx = md.distribute.get_replica_context()
            while True:
                ctx.all_reduce("SUM", torch.ones(1))

        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            strategy.run(forever)
        except KeyboardInterrupt:
            print("interrupted")
        out = strategy.run(lambda: md.distribute.get_replica_context().all_reduce("SUM", torch.ones(1)))
        print([float(t) for t in strategy.experimental_local_results(out)])
    """, timeout=60)
    assert proc.stdout.split() == ["interrupted", "[2.0,", "2.0]"]
