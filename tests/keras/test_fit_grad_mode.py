"""``fit`` trains whatever torch's grad mode on the calling thread: TensorFlow has no such mode, and a
Ctrl-C landing inside a ``torch.no_grad()``'s ``__enter__`` (Python code) leaves it off for good; the
replicas take the caller's modes, so the next ``fit`` raised "element 0 of tensors does not require grad"
(seen in test_replica_faults' Ctrl-C test, about one run in 50 under load)."""

import numpy as np
import pytest
import torch

import multidev as md


@pytest.mark.parametrize("devices", [None, ["/cpu:0", "/cpu:1"]], ids=["one_device", "two_replicas"])
def test_fit_trains_with_grad_disabled_on_the_calling_thread(devices):
    rng = np.random.RandomState(0)
    x = rng.randn(32, 4).astype("float32")
    y = 2 * x.sum(1, keepdims=True)
    weights = []
    for disabled in (False, True):
        strategy = md.distribute.MirroredStrategy(devices) if devices else md.distribute.get_strategy()
        with strategy.scope():
            model = md.keras.Sequential([md.keras.layers.Dense(1, kernel_initializer="ones")])
            model.compile(md.keras.optimizers.SGD(0.1), "mse")
        with torch.set_grad_enabled(not disabled):
            history = model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False).history
            assert torch.is_grad_enabled() is not disabled   # the caller's mode is left as it was
        weights.append(model.get_weights())
        assert np.isfinite(history["loss"]).all()
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(weights[1][0], 1.0)   # it trained
