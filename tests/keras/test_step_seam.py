"""The Keras <-> strategy seam: step runners get the step's kind, replicas get StepInputs, nothing is mutated."""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, models, step_inputs
from multidev.keras.models.compile_utils import LossesContainer
from multidev.values.context import replica_env


def _data(n=16):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, (x @ np.arange(1, 5, dtype="float32")[:, None]).astype("float32")


class Recording(models.Model):
    """Records what each replica's steps see of the seam."""

    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(1)
        self.seen = []

    def call(self, x, training=False):
        return self.dense(x)

    def _record(self, data):
        step = step_inputs.current()
        x, _, _ = md.keras.utils.unpack_x_y_sample_weight(data)   # predict's data is x itself, as in Keras
        self.seen.append((step.kind, step.global_batch_size, len(step.metric_states), int(x.shape[0]),
                          replica_env().replica_id))

    def train_step(self, data):
        self._record(data)
        return super().train_step(data)

    def test_step(self, data):
        self._record(data)
        return super().test_step(data)

    def predict_step(self, data):
        self._record(data)
        return super().predict_step(data)


def test_every_replica_gets_the_steps_kind_and_global_batch():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = Recording()
        model.compile("sgd", "mse", metrics=["mae"])
    x, y = _data(16)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    model.evaluate(x[:6], y[:6], batch_size=6, verbose=0)
    model.predict(x[:4], batch_size=4, verbose=0)
    seen = sorted(model.seen)
    assert seen == sorted([("train", 8, 2, 4, r) for r in (0, 1)] * 2 + [("test", 6, 2, 3, r) for r in (0, 1)]
                          + [("predict", 4, 0, 2, r) for r in (0, 1)])
    assert step_inputs.current() is None


def test_fit_changes_no_attribute_of_the_loss(monkeypatch):
    """The old hook set compiled_loss.global_batch_size around every step; now nothing is written."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = models.Sequential([layers.Dense(1, input_shape=(4,))])
        model.compile("sgd", "mse")
    writes = []
    original = LossesContainer.__setattr__
    monkeypatch.setattr(LossesContainer, "__setattr__", lambda self, k, v: (writes.append(k), original(self, k, v)))
    x, y = _data(16)
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    loss = model.evaluate(x, y, batch_size=8, verbose=0)
    assert writes == []
    assert np.isfinite(history.history["loss"]).all() and np.isfinite(loss)


def test_fit_on_two_replicas_matches_one_device():
    """Dividing by the StepInputs' global batch keeps two replicas' summed gradients equal to one device's."""
    x, y = _data(16)
    results = []
    for strategy in (md.distribute.OneDeviceStrategy("/cpu:0"), md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])):
        torch.manual_seed(1)
        with strategy.scope():
            model = models.Sequential([layers.Dense(1, input_shape=(4,))])
            model.compile(md.keras.optimizers.SGD(0.01), "mse", metrics=["mae"])
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        results.append((history.history["loss"], history.history["mae"],
                        [np.array(w) for w in model.get_weights()]))
    (loss1, mae1, w1), (loss2, mae2, w2) = results
    np.testing.assert_allclose(loss1, loss2, rtol=1e-5)
    np.testing.assert_allclose(mae1, mae2, rtol=1e-5)
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("runner_of", ["local", "strategy"])
def test_an_unknown_step_kind_is_refused(runner_of):
    if runner_of == "strategy":
        with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
            model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    else:
        model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    with pytest.raises(ValueError, match=r"Unknown step kind: 'fit'; valid kinds: \['train', 'test', 'predict'\]"):
        model._step_runner.run("fit", model.predict_step, (torch.ones(2, 4),), model)
    with pytest.raises(ValueError, match="Unknown step kind"):
        step_inputs.StepInputs("eval", 8)
