"""A Keras optimizer on distributed variables steps one plain torch optimizer per replica: no per-thread
views of param_groups/state, no global torch step hook, one canonical state for checkpoints."""

from collections import defaultdict

import numpy as np
import pytest
import torch
from torch.optim import optimizer as torch_optimizer

import multidev as md
from multidev.keras import optimizers


def _fit(strategy, name, epochs=2):
    rng = np.random.RandomState(0)
    x = rng.randn(64, 6).astype("float32")
    y = (x[:, 0] - x[:, 2] > 0).astype("int64")
    with (strategy or md.distribute.get_strategy()).scope():
        torch.manual_seed(5)
        model = md.keras.Sequential([md.keras.layers.Dense(8, activation="relu", input_shape=(6,)),
                                     md.keras.layers.Dense(2, activation="softmax")])
        model.compile(getattr(optimizers, name)(0.05), "sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0)
    return model


def _names(model):
    return {id(v): f"v{i}" for i, v in enumerate(model.trainable_variables)}


@pytest.mark.parametrize("strategy_kind", ["mirrored", "central_storage"])
def test_each_replica_steps_a_plain_torch_optimizer_without_global_hooks(strategy_kind):
    if strategy_kind == "mirrored":
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    else:
        strategy = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
    seen = []
    handle = torch_optimizer.register_optimizer_step_pre_hook(lambda opt, args, kwargs: seen.append(opt))
    try:
        model = _fit(strategy, "Adam")
    finally:
        handle.remove()
    opt = model.optimizer
    rules = opt._rules.rules
    assert len(rules) == 2
    assert not any(o is r for o in seen for r in rules)   # torch's global step hooks never ran for them
    variables = model.trainable_variables
    for r, rule in enumerate(rules):
        assert type(rule.param_groups) is list and all(type(g) is dict for g in rule.param_groups)
        assert type(rule.state) in (dict, defaultdict)
        params = [p for g in rule.param_groups for p in g["params"]]
        assert [id(p) for p in params] == [id(v._components[r]) for v in variables]  # this replica's copies
        assert all(type(p) is not type(v) for p, v in zip(params, variables))
    # One state per variable in all: its owner's (split update) or replica 0's (shared storage).
    assert sum(len(rule.state) for rule in rules) == len(variables)
    if strategy_kind == "central_storage":
        assert len(rules[1].state) == 0


def test_canonical_state_equals_one_device_and_loads_on_one_device():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two, one = _fit(strategy, "Adam"), _fit(None, "Adam")
    got, want = two.optimizer.state_tensors(_names(two)), one.optimizer.state_tensors(_names(one))
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(got[key].numpy(), want[key].numpy(), rtol=1e-5, atol=1e-6)
    assert len(two.optimizer.variables) == len(one.optimizer.variables)
    fresh = _fit(None, "Adam", epochs=0)
    fresh.optimizer.load_state_tensors(got, {f"v{i}": v for i, v in enumerate(fresh.trainable_variables)})
    loaded = fresh.optimizer.state_tensors(_names(fresh))
    for key in got:
        np.testing.assert_array_equal(loaded[key].numpy(), got[key].numpy())


def test_state_loaded_on_two_replicas_reaches_each_owner():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    one = _fit(None, "RMSprop")
    saved = one.optimizer.state_tensors(_names(one))
    two = _fit(strategy, "RMSprop", epochs=0)
    two.optimizer.load_state_tensors(saved, {f"v{i}": v for i, v in enumerate(two.trainable_variables)})
    assert sum(len(rule.state) for rule in two.optimizer._rules.rules) == len(two.trainable_variables)
    restored = two.optimizer.state_tensors(_names(two))
    assert sorted(restored) == sorted(saved)
    for key in saved:
        np.testing.assert_array_equal(restored[key].numpy(), saved[key].numpy())
