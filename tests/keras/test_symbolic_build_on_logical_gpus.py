"""A Keras model built with ``input_shape`` inside a strategy's scope on GPUs (found on an H200, issue 28).

The symbolic build runs each layer on a dummy batch; an unbuilt layer had no weights to take the device from, so
the dummy was made on the CPU while the build put the kernel on the replicas' GPU: "Expected all tensors to be on
the same device" before ``fit`` began (mixed-precision ``fit`` on two logical GPUs). Here the GPUs are stand-ins on
torch's ``meta`` device (a device distinct from the CPU), so the check runs on any machine.
"""

from __future__ import annotations

from tests.conftest import run_fresh
from tests.devices.fake_gpus import fake_gpus


def test_a_model_built_from_input_shape_in_scope_on_logical_gpus_builds_on_them():
    out = run_fresh(fake_gpus(1, """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        with strategy.scope():
            model = md.keras.Sequential([md.keras.layers.Dense(64, activation="relu", input_shape=(16,)),
                                         md.keras.layers.Dense(4, dtype="float32")])
            inputs = md.keras.Input(shape=(8,))
            functional = md.keras.Model(inputs, md.keras.layers.Dense(3)(md.keras.layers.Dense(5)(inputs)))
        assert model.output_shape == (None, 4), model.output_shape
        assert functional.output_shape == (None, 3), functional.output_shape
        devices = {str(c.device) for layer in model.layers + functional.layers[1:] for c in layer.kernel.values}
        assert devices == {"meta"}, devices
        print("OK")
        """, torch_device="meta"))
    assert "OK" in out.stdout
