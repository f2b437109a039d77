"""The unclear errors that fuzzing reported (issue 18, item 16), one by one: TF's exception type and
the received value in the message."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import multidev as md
from multidev.distribute.cluster_resolver import TFConfigClusterResolver
from multidev.distribute.cluster_resolver.tfconfig import parse_tf_config
from tests.fuzz._checks import check_error


def _tf_config(workers, task=None):
    return json.dumps({"cluster": {"worker": workers}, "task": task or {"type": "worker", "index": 0}})


def _raises(fn, error, match, *values):
    with pytest.raises(error, match=match) as info:
        fn()
    check_error(info.value, *values)


@pytest.fixture(scope="module")
def strategy():
    return md.distribute.MirroredStrategy()


@pytest.mark.parametrize("value", ["abc", None, object()])
def test_reduce_and_gather_of_non_tensors(strategy, value):
    _raises(lambda: strategy.reduce("MEAN", value, axis=None), TypeError, "cannot convert .* to a tensor", value)
    _raises(lambda: strategy.gather(value, axis=0), TypeError, "cannot convert .* to a tensor", value)


@pytest.mark.parametrize("axis, error", [(5, md.errors.InvalidArgumentError), (-3, md.errors.InvalidArgumentError),
                                         ("0", TypeError), (1.0, TypeError), (True, TypeError)])
def test_reduce_and_gather_axis(strategy, axis, error):
    value = strategy.run(lambda: torch.ones(2, 3))
    _raises(lambda: strategy.reduce("SUM", value, axis=axis), error, "axis", axis)
    _raises(lambda: strategy.gather(value, axis=axis), error, "axis", axis)
    assert strategy.gather(value, axis=1).shape == (2, 3 * strategy.num_replicas_in_sync)


@pytest.mark.parametrize("structure", [{}, (), ((), {})])
def test_from_tensor_slices_of_an_empty_structure(structure):
    _raises(lambda: md.data.Dataset.from_tensor_slices(structure), ValueError, "has no components", structure)


def test_from_tensor_slices_with_unsortable_keys():
    _raises(lambda: md.data.Dataset.from_tensor_slices({"a": [1], 1: [2]}), TypeError, "cannot be sorted", ["a", 1])


@pytest.mark.parametrize("address", ["my host:2222", "a\nb:2222", " localhost:2222", "localhost:2222\n", "host\t:1",
                                     "a:١٢٣", "a:²", "ｈｏｓｔ:1", "[localhost]:1", "[::1:1"])
def test_tf_config_addresses(address):
    _raises(lambda: parse_tf_config(_tf_config([address])), ValueError, "Unparsable address", address)


def test_deeply_nested_tf_config():
    _raises(lambda: parse_tf_config("[" * 100_000 + "]" * 100_000), ValueError, "nests too deeply")


@pytest.mark.parametrize("index", ["x", 1.5, "١", "²", True, -1, [1]])
def test_task_index_in_tf_config_and_overrides(monkeypatch, index):
    _raises(lambda: parse_tf_config(_tf_config(["a:1", "b:2"], {"type": "worker", "index": index})), ValueError,
            "Task index", index)
    monkeypatch.setenv("TF_CONFIG", _tf_config(["a:1", "b:2"]))
    _raises(lambda: TFConfigClusterResolver(task_id=index), ValueError, "Task index", index)
    monkeypatch.delenv("TF_CONFIG")
    _raises(lambda: TFConfigClusterResolver(task_id=index), ValueError, "Task index", index)
    resolver = TFConfigClusterResolver()
    with pytest.raises(ValueError, match="Task index"):
        resolver.task_id = index
    assert resolver.task_id is None


@pytest.mark.parametrize("a, b", [("localhost", "127.0.0.1"), ("127.1", "localhost"), ("[::1]", "[0::1]")])
def test_one_address_spelled_two_ways(a, b):
    _raises(lambda: parse_tf_config(_tf_config([f"{a}:5000", f"{b}:5000"])), ValueError, "Duplicate address",
            f"{b}:5000")


@pytest.mark.parametrize("name", ["/device:CPU:١", "/cpu:²", "/job:w/task:٣", "/device:CPU\n:0", "/job:w\n/cpu:0",
                                  "/device:GPU:0\n/task:1"])
def test_device_names_with_non_ascii_digits_or_newlines(name):
    _raises(lambda: md.DeviceSpec.from_string(name), ValueError, "Malformed device name", name)


def test_device_index_without_a_type_round_trips():
    spec = md.DeviceSpec(device_index=1)
    assert spec.to_string() == "/device:*:1" and md.DeviceSpec.from_string(spec.to_string()) == spec


@pytest.mark.parametrize("batch_size, error", [(1.5, TypeError), (float("inf"), TypeError), (float("nan"), TypeError),
                                               ("4", TypeError), (True, TypeError), (0, ValueError), (-2, ValueError)])
def test_fit_batch_size(batch_size, error):
    model = md.keras.Sequential([md.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 2), np.float32), np.ones((4, 1), np.float32)
    _raises(lambda: model.fit(x, y, batch_size=batch_size, verbose=0), error, "batch_size", batch_size)
    assert len(model.fit(x, y, batch_size=np.int64(2), verbose=0).history["loss"]) == 1


# ----- issue 27, item 5: what the fuzzer still met ------------------------------------------------

@pytest.mark.parametrize("name", [" ", "CPU", "GPU", "/job:localhost"])
@pytest.mark.parametrize("fn", ["get_memory_info", "get_memory_usage", "reset_memory_stats"])
def test_memory_statistics_refuse_names_without_type_and_index(fn, name):
    call = getattr(md.config.experimental, fn)
    _raises(lambda: call(name), ValueError, "Failed parsing device name", name)


def test_memory_statistics_of_the_empty_name_and_a_cpu_are_zeros_as_tf():
    for name in ("", "CPU:0", "/device:CPU:0"):     # TF 2.21: zeros (it keeps no CPU statistics)
        assert md.config.experimental.get_memory_info(name) == {"current": 0, "peak": 0}
        assert md.config.experimental.get_memory_usage(name) == 0
        assert md.config.experimental.reset_memory_stats(name) is None


def _fit_model():
    model = md.keras.Sequential([md.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model, np.ones((4, 2), np.float32), np.ones((4, 1), np.float32)


def test_fit_takes_numpy_integers_wherever_it_takes_an_int():
    model, x, y = _fit_model()
    history = model.fit(x, y, batch_size=np.int64(2), epochs=np.int32(2), initial_epoch=np.int64(0),
                        steps_per_epoch=np.int64(2), validation_split=np.float64(0.5), validation_freq=np.int64(1),
                        verbose=0)
    assert len(history.history["loss"]) == 2 and "val_loss" in history.history
    assert len(model.evaluate(x, y, steps=np.int64(1), verbose=0, return_dict=True)) == 1
    assert model.predict(x, batch_size=np.int64(2), steps=np.int64(1), verbose=0).shape == (2, 1)


@pytest.mark.parametrize("kwargs, error, shown", [
    ({"epochs": "x"}, TypeError, "x"), ({"epochs": 2.0}, TypeError, 2.0), ({"epochs": -1}, ValueError, -1),
    ({"validation_split": "x"}, TypeError, "x"), ({"validation_split": 1.0}, ValueError, 1.0),
    ({"validation_split": True}, TypeError, True), ({"initial_epoch": "0"}, TypeError, "0"),
    ({"steps_per_epoch": 0}, ValueError, 0), ({"validation_freq": "x", "validation_split": 0.5}, TypeError, "x"),
])
def test_fit_refuses_bad_counts_before_training(kwargs, error, shown):
    model, x, y = _fit_model()
    before = [w.copy() for w in model.get_weights()]
    name = next(iter(kwargs))
    _raises(lambda: model.fit(x, y, verbose=0, **kwargs), error, name, shown)
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)                  # nothing trained


@pytest.mark.parametrize("index", [10**5000, "9" * 5000, 10**19], ids=["int-5001-digits", "str-5000-digits", "1e19"])
def test_huge_task_indices_are_refused_without_pythons_digit_limit(index):
    with pytest.raises(ValueError, match="Task index .* must be a non-negative int") as info:
        TFConfigClusterResolver(task_id=index)
    assert "4300" not in str(info.value) and "sys.set_int_max_str_digits" not in str(info.value)
    text = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": ' + "9" * 5000 + "}}"
    with pytest.raises(ValueError, match="an integer of 5000 digits") as info:
        parse_tf_config(text)
    assert "sys.set_int_max_str_digits" not in str(info.value)


@pytest.mark.parametrize("value", [None, "abc", object()])
def test_all_reduce_and_all_gather_of_non_tensors_inside_run(strategy, value):
    def fn():
        return md.distribute.get_replica_context().all_reduce("SUM", value)

    _raises(lambda: strategy.run(fn), ValueError, "unsupported type", value)
