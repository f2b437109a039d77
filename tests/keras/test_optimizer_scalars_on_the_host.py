"""An md.keras optimizer's scalars stay on the host wherever its variables are (found reading the GPU path).

The update rules read the learning rate, ``iterations`` and each variable's step count (Nadam: its momentum
product) as Python floats every step. Made in ``md.device("/GPU:0")``, or by a rule's first step in a replica on a
GPU, those scalars were GPU tensors: a host-device synchronisation per variable per step. The GPU here is a
stand-in on torch's ``meta`` device (``tests/devices/fake_gpus.py``), where reading a number raises: the old code
failed at the first step's learning-rate read.
"""

from __future__ import annotations

from tests.conftest import run_fresh
from tests.devices.fake_gpus import fake_gpus


def test_rates_counters_and_products_stay_on_the_host_while_slots_follow_the_variables():
    out = run_fresh(fake_gpus(1, """
        import torch, multidev as md

        optimizers = {"Adam": lambda: md.keras.optimizers.Adam(0.01), "Nadam": lambda: md.keras.optimizers.Nadam(),
                      "AdamW": lambda: md.keras.optimizers.AdamW(0.01, weight_decay=0.1),
                      "SGD": lambda: md.keras.optimizers.SGD(0.1, momentum=0.9),
                      "SGD schedule": lambda: md.keras.optimizers.SGD(
                          md.keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)),
                      "RMSprop": lambda: md.keras.optimizers.RMSprop(), "Adagrad": lambda: md.keras.optimizers.Adagrad(),
                      "Adamax": lambda: md.keras.optimizers.Adamax(), "Adadelta": lambda: md.keras.optimizers.Adadelta(),
                      "Ftrl": lambda: md.keras.optimizers.Ftrl(), "Lion": lambda: md.keras.optimizers.Lion()}
        for name, make in optimizers.items():
            with md.device("/GPU:0"):
                model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(2)])
                optimizer = make()
                for _ in range(2):
                    with md.GradientTape() as tape:
                        loss = md.reduce_sum(model(torch.ones(3, 4)))
                    grads = tape.gradient(loss, model.trainable_variables)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
            assert int(optimizer.iterations) == 2, (name, optimizer.iterations)
            scalars = [t for t in optimizer.variables if t.dim() == 0]
            slots = [t for t in optimizer.variables if t.dim() > 0]
            assert {t.device.type for t in scalars} == {"cpu"}, (name, [(t.dtype, t.device) for t in scalars])
            assert {t.device.type for t in slots} <= {"meta"}, (name, [(t.shape, t.device) for t in slots])
            print(name, "ok", len(scalars), len(slots))
        print("OK")
        """, torch_device="meta"))
    assert "OK" in out.stdout, out.stdout
