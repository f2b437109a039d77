"""The replica environment: one immutable ReplicaEnv per replica task, in one context variable."""

import dataclasses
import threading

import pytest
import torch

import multidev as md
from multidev.keras.layers.base import current_training
from multidev.placement import current_device
from multidev.values.context import current_replica_id, current_scope_strategy, replica_env


def _two_cpus():
    return md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _in_thread(fn):
    """``fn()`` in a new threading.Thread; its result."""
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(30)
    return out[0]


def test_each_replica_sees_its_own_env_and_none_outside():
    strategy = _two_cpus()
    seen = {}

    def fn():
        env = replica_env()
        seen[env.replica_id] = (env.device.name, env.strategy, env.replica_context.replica_id_in_sync_group,
                                env.step, current_replica_id(), current_scope_strategy())
        with pytest.raises(dataclasses.FrozenInstanceError):
            env.replica_id = 5

    assert replica_env() is None
    strategy.run(fn)
    assert replica_env() is None and current_replica_id() is None
    names = [d.name for d in strategy.extended._devices]
    assert sorted(seen) == [0, 1]
    for r in (0, 1):
        assert seen[r] == (names[r], strategy, r, None, r, strategy)


def test_step_inputs_reach_every_replica_through_the_env():
    strategy = _two_cpus()
    step = object()
    with strategy.scope():
        steps = strategy.extended._call_for_each_replica(lambda: (replica_env().replica_id, replica_env().step),
                                                         (), {}, step=step)
    assert strategy.experimental_local_results(steps) == ((0, step), (1, step))
    without = strategy.run(lambda: (replica_env().replica_id, replica_env().step))
    assert strategy.experimental_local_results(without) == ((0, None), (1, None))


def test_a_thread_started_by_a_replica_does_not_see_its_env():
    strategy = _two_cpus()

    def look():
        return (replica_env(), current_replica_id(), current_scope_strategy(), current_device(),
                md.config.experimental.get_device_policy(), md.distribute.has_strategy())

    def fn():
        inside = look()
        return inside[1:5] == (replica_env().replica_id, strategy, replica_env().device, "explicit"), _in_thread(look)

    md.config.experimental.set_device_policy("explicit")
    try:
        results = strategy.experimental_local_results(strategy.run(fn))
    finally:
        md.config.experimental.set_device_policy(None)
    for replica_sees_its_own, thread_sees in results:
        assert replica_sees_its_own
        assert thread_sees == (None, None, None, None, "silent", False)


def test_a_user_thread_does_not_inherit_the_callers_scopes():
    strategy = _two_cpus()
    look = lambda: (current_scope_strategy(), current_device(), md.config.experimental.get_device_policy())  # noqa: E731
    md.config.experimental.set_device_policy("warn")
    try:
        with strategy.scope(), md.device("/cpu:1") as device:
            assert (current_scope_strategy(), current_device()) == (strategy, device)
            assert _in_thread(look) == (None, None, "silent")
    finally:
        md.config.experimental.set_device_policy(None)
    assert look() == (None, None, "silent")


def test_scopes_and_envs_restore_after_exceptions():
    strategy = _two_cpus()
    inner = {}

    def merge_fails(_):
        assert current_replica_id() is None and current_scope_strategy() is strategy
        raise KeyError("in merge_call")

    def fn():
        r = current_replica_id()
        try:
            md.distribute.get_replica_context().merge_call(merge_fails)
        except KeyError:
            pass
        inner[r] = (current_replica_id(), replica_env().replica_id)
        layer = md.keras.layers.Lambda(lambda x: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            layer(torch.ones(1), training=True)
        assert current_training() is None
        raise ValueError(f"replica {r} fails")

    with md.device("/cpu:1") as device, strategy.scope():
        with pytest.raises(ValueError, match="fails"):
            strategy.run(fn)
        assert replica_env() is None and current_scope_strategy() is strategy and current_device() == device
    assert inner == {0: (0, 0), 1: (1, 1)}
    assert (current_scope_strategy(), current_device(), current_training()) == (None, None, None)
    assert strategy.experimental_local_results(strategy.run(current_replica_id)) == (0, 1)   # still usable


def test_a_scope_exited_in_another_thread_raises():
    strategy = _two_cpus()
    scope = strategy.scope()
    scope.__enter__()
    try:
        error = _in_thread(lambda: _exit_error(scope))
        assert isinstance(error, RuntimeError) and "out of order" in str(error)
    finally:
        scope.__exit__(None, None, None)
    assert current_scope_strategy() is None


def _exit_error(scope):
    try:
        scope.__exit__(None, None, None)
    except RuntimeError as e:
        return e
    return None


def test_replicas_see_the_callers_placement_logging(fresh):
    """Placement logging turned on in the caller logs the ops of every replica thread, on its device."""
    proc = fresh(
        """
        import torch
        import multidev as md
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        md.debugging.set_log_device_placement(True)
        strategy.run(lambda: torch.ones(2).mul(3.0))
        md.debugging.set_log_device_placement(False)
        """
    )
    for i in (0, 1):
        assert f"Executing op mul in device /job:localhost/replica:0/task:0/device:CPU:{i}" in proc.stderr
