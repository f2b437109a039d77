"""OneDeviceStrategy('/GPU:0') keeps what its scope makes on the GPU, as TensorFlow places its variables there.

Found on stand-in GPUs: a module parameter made in the scope was replaced by a new ``nn.Parameter`` on the GPU, so
a Keras weight lost its class (``model.weights[0].trainable`` raised AttributeError, names were gone); buffers
(BatchNormalization's moving statistics, torch's running statistics) and ``md.Variable``s stayed on the host, so
every step copied them to the GPU and back. Now they move in place (``_core/moved_in_place.py``). The GPU is a
stand-in on torch's ``meta`` device (``tests/devices/fake_gpus.py``).
"""

from __future__ import annotations

from tests.conftest import run_fresh
from tests.devices.fake_gpus import meta_replicas


def test_weights_buffers_and_variables_made_in_scope_live_on_the_device_with_their_class():
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        _equal = torch.equal                       # the symbolic build's state check compares values: none on meta
        torch.equal = lambda a, b: True if a.device.type == "meta" else _equal(a, b)
        L = md.keras.layers
        for device, expected in (("/GPU:0", "meta"), ("/CPU:0", "cpu")):
            with md.distribute.OneDeviceStrategy(device).scope():
                model = md.keras.Sequential([md.keras.Input((4,)), L.Dense(8, name="d"), L.BatchNormalization(name="bn"),
                                             L.Dense(3, name="out")])
                net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
                v = md.Variable(torch.zeros(3), name="v")
                counter = md.Variable(0, trainable=False, dtype=md.int64)
            seen = [(w.path, type(w).__name__, w.device.type, w.trainable) for w in model.weights]
            assert {d for _, _, d, _ in seen} == {expected}, seen
            assert [(p.split("/", 1)[1], t) for p, _, _, t in seen] == [
                ("d/kernel", True), ("d/bias", True), ("bn/gamma", True), ("bn/beta", True),
                ("bn/moving_mean", False), ("bn/moving_variance", False), ("out/kernel", True), ("out/bias", True)], seen
            assert [c for _, c, _, _ in seen] == ["KerasParameter"] * 4 + ["KerasBuffer"] * 2 + ["KerasParameter"] * 2, seen
            assert {t.device.type for t in list(net.parameters()) + list(net.buffers())} == {expected}
            assert type(net[0].weight) is torch.nn.Parameter and net[0].weight.requires_grad
            assert (v.device.type, v.name, counter.device.type, int(counter.numel())) == (expected, "v:0", expected, 1)
            if expected == "meta":
                model.compile("adam", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                              metrics=["accuracy"])
                train = model.make_train_function()
                x, y = torch.ones(4, 4, device="meta"), torch.zeros(4, dtype=torch.int64, device="meta")
                for i in range(4):
                    WATCH[0] = i >= 2
                    train((x, y))
                WATCH[0] = False
                assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout
