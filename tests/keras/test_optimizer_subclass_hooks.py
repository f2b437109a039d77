"""An optimizer subclass's ``apply`` override trains in ``fit`` (Keras 3's hook: keras.io's gradient
centralization), and a custom ``LearningRateSchedule`` and optimizer class come back from a ``.keras`` file
through ``custom_objects`` (tests/programs/keras/p45 runs the whole example on 2 replicas)."""

import os

import numpy as np
import pytest

import multidev as md

K = md.keras


class CentralizedSGD(K.optimizers.SGD):
    """Subtracts each kernel gradient's column mean, as keras.io's GC optimizers do, where Keras 3 applies."""
    calls = 0

    def apply(self, grads, trainable_variables=None):
        type(self).calls += 1
        grads = [g - K.ops.mean(g, axis=0, keepdims=True) if len(g.shape) > 1 else g for g in grads]
        return super().apply(grads, trainable_variables)


class Halving(K.optimizers.schedules.LearningRateSchedule):
    def __init__(self, start):
        self.start = start

    def __call__(self, step):
        return self.start / (2.0 ** K.ops.cast(step, "float32"))

    def get_config(self):
        return {"start": self.start}


def _model():
    K.utils.set_random_seed(0)
    return K.Sequential([K.Input((4,)), K.layers.Dense(3)])


def test_fit_goes_through_an_overridden_apply():
    model = _model()
    before = model.layers[0].kernel.numpy().copy()
    model.compile(optimizer=CentralizedSGD(learning_rate=1.0), loss="mse")
    rng = np.random.RandomState(0)
    CentralizedSGD.calls = 0
    model.fit(rng.random((8, 4)).astype("float32"), rng.random((8, 3)).astype("float32"), batch_size=8, verbose=0)
    assert CentralizedSGD.calls == 1
    change = model.layers[0].kernel.numpy() - before
    assert np.abs(change).max() > 1e-3
    np.testing.assert_allclose(change.mean(axis=0), 0.0, atol=1e-6)    # the centralized gradient was applied


def test_a_custom_schedule_and_optimizer_load_through_custom_objects(tmp_path):
    model = _model()
    model.compile(optimizer=CentralizedSGD(learning_rate=Halving(0.5)), loss="mse")
    model.fit(np.ones((4, 4), "float32"), np.ones((4, 3), "float32"), batch_size=2, verbose=0)
    path = os.fspath(tmp_path / "m.keras")
    model.save(path)
    loaded = K.models.load_model(path, custom_objects={"CentralizedSGD": CentralizedSGD, "Halving": Halving})
    assert type(loaded.optimizer) is CentralizedSGD and int(loaded.optimizer.iterations) == 2
    assert float(loaded.optimizer.learning_rate) == pytest.approx(0.125)      # Halving(0.5) at step 2
    with pytest.raises(ValueError, match="Unknown optimizer: 'CentralizedSGD'.*custom_objects"):
        K.models.load_model(path)
    with pytest.raises(ValueError, match="Unknown learning rate schedule: 'Halving'.*custom_objects"):
        K.models.load_model(path, custom_objects={"CentralizedSGD": CentralizedSGD})
