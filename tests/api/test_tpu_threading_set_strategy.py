"""TPU names raising what is missing, md.config.threading (fresh interpreter), experimental_set_strategy."""

from __future__ import annotations

import pytest

import multidev as md


@pytest.mark.parametrize("make", [lambda: md.distribute.TPUStrategy(),
                                  lambda: md.distribute.experimental.TPUStrategy(),
                                  lambda: md.distribute.cluster_resolver.TPUClusterResolver(tpu="")])
def test_tpu_names_exist_and_say_what_is_missing(make):
    with pytest.raises(ValueError) as err:
        make()
    text = str(err.value)
    assert "multidev has no TPU backend" in text and "MirroredStrategy" in text
    import importlib.util
    if importlib.util.find_spec("torch_xla") is None:
        assert "torch_xla is not installed" in text


def test_experimental_set_strategy_enters_and_leaves_the_scope():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    md.distribute.experimental_set_strategy(strategy)
    try:
        assert md.distribute.get_strategy() is strategy and md.distribute.has_strategy()
        assert isinstance(md.Variable(1.0), md.distribute.MirroredVariable)
        other = md.distribute.OneDeviceStrategy("/cpu:0")
        md.distribute.experimental_set_strategy(other)             # replaces the first one
        assert md.distribute.get_strategy() is other
    finally:
        md.distribute.experimental_set_strategy(None)
    assert not md.distribute.has_strategy()
    with strategy.scope():
        with pytest.raises(RuntimeError, match="Must not be called inside"):
            md.distribute.experimental_set_strategy(strategy)
    with pytest.raises(TypeError, match="Strategy or None, got 'mirrored'"):
        md.distribute.experimental_set_strategy("mirrored")


THREADS = """
import torch, multidev as md
t = md.config.threading
assert t.get_intra_op_parallelism_threads() == 0 and t.get_inter_op_parallelism_threads() == 0
t.set_intra_op_parallelism_threads(2); t.set_inter_op_parallelism_threads(3)
assert torch.get_num_threads() == 2 and torch.get_num_interop_threads() == 3
assert t.get_intra_op_parallelism_threads() == 2 and t.get_inter_op_parallelism_threads() == 3
md.config.list_logical_devices()                      # initializes the devices
t.set_intra_op_parallelism_threads(2)                 # the same value again is fine
for setter in (t.set_intra_op_parallelism_threads, t.set_inter_op_parallelism_threads):
    try:
        setter(1)
    except RuntimeError as err:
        assert "cannot be modified after initialization" in str(err), err
    else:
        raise AssertionError("no RuntimeError")
try:
    t.set_intra_op_parallelism_threads(-1)
except ValueError as err:
    assert "-1" in str(err)
print("OK")
"""


def test_threading_settings_follow_tensorflow_rules(fresh):
    assert fresh(THREADS).stdout.strip() == "OK"
