"""A model whose weights are on a GPU takes host inputs, as TensorFlow copies an op's inputs to its device.

A model made in ``md.device("/GPU:0")`` (or a strategy's scope on GPUs) and then called outside it with numpy or
CPU tensors met "Expected all tensors to be on the same device"; tensors a layer's ``call`` or a custom
``train_step`` makes with torch's factories landed on the CPU. A model made outside any scope stays on the CPU
(docs/architecture.md, "Default placement"), and ``fit`` says so once when a GPU is visible. The GPUs here are
stand-ins (``tests/devices/fake_gpus.py``): on torch's ``meta`` device, distinct from the CPU, the checks run
on any machine (meta tensors have shapes and devices but no values, so nothing here reads a number).
"""

from __future__ import annotations

import warnings

import numpy as np

import multidev as md
from tests.conftest import run_fresh
from tests.devices.fake_gpus import fake_gpus


def test_outer_calls_move_their_inputs_and_run_in_the_weights_device_scope():
    out = run_fresh(fake_gpus(1, """
        import numpy as np, torch, multidev as md

        class Offset(md.keras.layers.Layer):      # makes a tensor with a torch factory, no device given
            def call(self, x):
                return x + torch.ones(x.shape[-1])

        with md.device("/GPU:0"):
            model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(3), Offset()])
            a, b = md.keras.Input((4,)), md.keras.Input((2,))
            two = md.keras.Model([a, b], md.keras.layers.Concatenate()([md.keras.layers.Dense(2)(a), b]))
            attention = md.keras.layers.MultiHeadAttention(num_heads=1, key_dim=2)
            attention(torch.zeros(1, 3, 4), torch.zeros(1, 5, 4))
        with md.distribute.OneDeviceStrategy("/GPU:0").scope():
            in_scope = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(3)])
        x = np.ones((2, 4), "float32")
        seen = {
            "numpy": model(x).device.type,
            "cpu tensor": model(torch.ones(2, 4)).device.type,
            "a list of two inputs": two([x, torch.ones(2, 2)]).device.type,
            "a second positional input": attention(torch.ones(1, 3, 4), torch.ones(1, 5, 4)).device.type,
            "made in a strategy's scope": in_scope(x).device.type,
        }
        assert set(seen.values()) == {"meta"}, seen
        class HandPlaced(md.keras.Model):      # layers placed by hand: the call's own scopes place its ops
            def __init__(self):
                super().__init__()
                with md.device("/CPU:0"):
                    self.a = md.keras.layers.Dense(3)
                    self.a.build((None, 4))
                with md.device("/GPU:0"):
                    self.b = md.keras.layers.Dense(2)
                    self.b.build((None, 3))
            def call(self, x):
                with md.device("/CPU:0"):
                    h = self.a(x)
                with md.device("/GPU:0"):
                    return self.b(h)

        hand = HandPlaced()
        assert (hand.a.kernel.device.type, hand.b.kernel.device.type) == ("cpu", "meta")
        assert hand(np.ones((2, 4), "float32")).device.type == "meta"
        cpu_model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(3)])
        assert cpu_model.layers[0].kernel.device.type == "cpu"      # no scope: where torch makes it
        assert cpu_model(x).device.type == "cpu"

        made = []

        class Probe(md.keras.Model):           # a custom train_step's factory tensors land on the model's device
            def __init__(self):
                super().__init__()
                self.dense = md.keras.layers.Dense(1)
            def call(self, x):
                return self.dense(x)
            def train_step(self, data):
                made.append((torch.zeros(1).device.type, data[0].device.type))
                raise StopIteration("probe")

        with md.device("/GPU:0"):
            probe = Probe()
            probe(x)
        probe.compile("sgd", "mse")
        try:
            probe.fit(x, np.ones((2, 1), "float32"), verbose=0)
        except Exception:
            pass
        assert made == [("meta", "meta")], made
        print("OK")
        """, torch_device="meta"))
    assert "OK" in out.stdout


def test_fit_on_the_cpu_while_a_gpu_is_visible_says_so_once_per_model():
    out = run_fresh(fake_gpus(1, """
        import warnings
        import numpy as np, multidev as md

        x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")

        def fits(model, times=2):
            model.compile("sgd", "mse")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(times):
                    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
                model.evaluate(x, y, verbose=0)
            return [str(w.message) for w in caught if "md.keras: fit runs on the CPU" in str(w.message)]

        said = fits(md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(1)]))
        assert len(said) == 1, said
        assert "1 logical GPU(s) are visible" in said[0] and "md.device('/GPU:0')" in said[0], said
        with md.device("/CPU:0"):
            placed = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(1)])
            placed.compile("sgd", "mse")
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                placed.fit(x, y, verbose=0)     # inside a device scope the user chose where it runs
        print("OK")
        """, torch_device="cpu"))
    assert "OK" in out.stdout


def test_no_gpu_no_warning_and_cpu_calls_unchanged():
    model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile("sgd", "mse")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(np.ones((4, 4), "float32"), np.ones((4, 1), "float32"), verbose=0)
    assert model(np.ones((1, 4), "float32")).device.type == "cpu"
