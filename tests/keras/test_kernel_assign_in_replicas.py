"""A Keras layer's trainable weight written with ``assign`` inside a replica's forward, as keras.io's PixelCNN masks
its kernel (``self.conv.kernel.assign(self.conv.kernel * self.mask)`` in ``call``). In a replica ``layer.kernel`` is
that replica's copy (the fast path); it takes the variable API TensorFlow's weights have there (``assign``,
``assign_add``, ``assign_sub``, ``numpy``, ``value``, ``name``), each replica writing its own copy (aggregation NONE,
as TensorFlow 2.21's Keras 3 and tf_keras: ``tf_2.21_masked_kernel_assign.json``, recorded by
``_masked_kernel_program.py``). Before: AttributeError "'Tensor' object has no attribute 'assign'" on 2 replicas."""

import json
import os

import numpy as np
import pytest

from tests.conftest import run_fresh

PROGRAM = """
import json
import numpy as np
import multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
from tests.keras import _masked_kernel_program as program
K = md.keras
strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
out = program.run(K, {"one_device": md.distribute.get_strategy(), "mirrored_2": strategy})

with strategy.scope():
    layer = K.layers.Dense(2, name="probe")
    layer.build((None, 3))
layer.set_weights([np.ones((3, 2), "float32"), np.zeros(2, "float32")])

def writes():
    k = layer.kernel
    k.assign(k * 0.5)
    k.assign_add(np.full((3, 2), 2.0))
    k.assign_sub(md.keras.ops.ones((3, 2)))
    return {"numpy": k.numpy().tolist(), "value_is_copy": k.value is k, "name": k.name,
            "trainable": k.trainable}

seen = strategy.run(writes)
out["idioms"] = {"copies": [np.asarray(c.detach()).tolist() for c in layer.kernel.values],
                 "seen": [strategy.experimental_local_results(seen)[r] for r in range(2)]}
try:
    strategy.run(lambda: layer.kernel.assign(
        layer.kernel * 0 + md.distribute.get_replica_context().replica_id_in_sync_group))
    out["drift"] = None
except ValueError as e:
    out["drift"] = str(e)
try:
    strategy.run(lambda: layer.kernel.assign(np.zeros((4, 2))))
    out["bad_shape"] = None
except ValueError as e:
    out["bad_shape"] = str(e)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def result():
    return json.loads(run_fresh(PROGRAM, timeout=300).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tensorflow():
    with open(os.path.join(os.path.dirname(__file__), "tf_2.21_masked_kernel_assign.json")) as f:
        return json.load(f)


def test_masked_kernel_trains_on_two_replicas_as_on_one_device(result):
    one, two = result["one_device"], result["mirrored_2"]
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)
    np.testing.assert_allclose(two["kernel"], one["kernel"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(two["predict"], one["predict"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("framework", ["keras3", "tf_keras"])
@pytest.mark.parametrize("mode", ["one_device", "mirrored_2"])
def test_masked_kernel_gives_tensorflows_numbers(result, tensorflow, framework, mode):
    ours, theirs = result[mode], tensorflow[framework][mode]
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=2e-5)
    np.testing.assert_allclose(ours["kernel"], theirs["kernel"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours["leak"], theirs["leak"], rtol=1e-4)


def test_each_replica_writes_its_own_copy_once(result):
    want = (np.ones((3, 2)) * 0.5 + 2.0 - 1.0).tolist()    # not the replicas' sum
    idioms = result["idioms"]
    assert idioms["copies"] == [want, want]
    for seen in idioms["seen"]:
        assert seen == {"numpy": want, "value_is_copy": True, "name": "kernel", "trainable": True}


def test_replicas_writing_different_values_raise(result):
    assert result["drift"] is not None and "differs from replica 0's" in result["drift"]


def test_a_value_of_another_shape_is_refused(result):
    assert "Cannot assign a value of shape (4, 2) to a weight of shape (3, 2)" in result["bad_shape"]
