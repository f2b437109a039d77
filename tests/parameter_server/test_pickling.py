"""Shipping closures to workers: ps variables, the strategy and per-worker values travel as references."""

from __future__ import annotations

import threading

import pytest
import torch

from multidev.distribute.parameter_server import pickling
from tests.integrations._keras3_env import import_keras3
from multidev.distribute.parameter_server.variables import Shard, ShardedVariable, VariableSpec, from_spec


def _spec(vid: int, sharded: bool = False) -> VariableSpec:
    layout = (Shard(0, vid + 1, 0, 2), Shard(1, vid + 2, 2, 4)) if sharded else (Shard(0, vid),)
    return VariableSpec(vid, f"v{vid}", (4, 3), torch.float32, True, layout, sharded)


def test_closure_refers_to_variables_strategy_and_per_worker_values():
    strategy = object()
    table = from_spec(_spec(10, sharded=True))
    layer = torch.nn.Linear(3, 1)
    layer.weight = from_spec(VariableSpec(20, "w", (1, 3), torch.float32, True, (Shard(1, 20),), False))
    layer.bias.requires_grad_(False)      # a frozen local parameter travels by value
    iterator = pickling.Reference(("per_worker", 5))
    guard = threading.Lock()

    def step():
        with guard:
            return layer(torch.nn.functional.embedding(torch.tensor([1]), table)), strategy, iterator

    blob, specs = pickling.dumps(step, strategy)
    assert sorted(specs) == [10, 20] and specs[10].sharded and specs[10].layout[1].ps == 1
    resolved = {("var", 10): torch.ones(4, 3), ("var", 20): torch.nn.Parameter(torch.ones(1, 3)),
                ("strategy",): "worker strategy", ("per_worker", 5): "worker iterator"}
    remote_step = pickling.loads(blob, lambda key: resolved[key])
    out, seen_strategy, seen_iterator = remote_step()
    assert seen_strategy == "worker strategy" and seen_iterator == "worker iterator"
    assert out.item() == pytest.approx(3.0 + layer.bias.item())


def test_unpicklable_captures_are_named():
    numbers = (i for i in range(3))  # a generator cannot be pickled
    with pytest.raises(TypeError, match="Cannot send .* to the workers.*generator"):
        pickling.dumps(lambda: next(numbers), None)


def test_sharded_variable_shards_are_views_of_the_whole():
    table = from_spec(_spec(30, sharded=True))
    assert isinstance(table, ShardedVariable)
    with torch.no_grad():
        table.detach().copy_(torch.arange(12.0).reshape(4, 3))
    first, second = table.variables
    assert torch.equal(first.detach(), table.detach()[:2]) and torch.equal(second.detach(), table.detach()[2:])
    assert first.ps_tasks == (0,) and second.ps_tasks == (1,) and table.ps_tasks == (0, 1)
    assert table._is_stale()  # written locally: the coordinator would push it before the next function


def test_a_trainable_parameter_built_outside_the_scope_is_refused():
    """Each worker would train its own copy of it, silently (TF keeps such variables on the coordinator)."""
    local = torch.nn.Linear(3, 1)                       # built outside ParameterServerStrategy.scope()

    def step():
        local(torch.ones(1, 3)).sum().backward()

    with pytest.raises(ValueError, match=r"trainable parameter of shape \(1, 3\) that is not stored on the "
                                         r"parameter servers.*inside `with strategy.scope\(\):`"):
        pickling.dumps(step, None)
    frozen = torch.nn.Linear(3, 1).requires_grad_(False)       # inference with frozen weights is fine
    assert pickling.dumps(lambda: frozen(torch.ones(1, 3)), None)[1] == {}


def test_a_keras3_model_built_outside_the_scope_is_refused():
    """Keras 3 pickles a model as a saved file: the check looks at the module's parameters."""
    keras = import_keras3()
    model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match=r"trainable parameter of shape .*Keras 3 models are not distributed"):
        pickling.dumps(lambda: model(torch.ones(1, 4)), None)
