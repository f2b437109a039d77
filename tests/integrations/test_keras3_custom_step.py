"""A Keras 3 model's own train_step/test_step (keras.io "Customizing what happens in fit() with PyTorch")
run by fit/evaluate on 2 replicas equals one device: weights, per-epoch logs, uneven last batch included."""

from __future__ import annotations

import pytest
import torch

import multidev as md
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()

DEVICES = ["/cpu:0", "/cpu:1"]
FIT = dict(batch_size=8, epochs=2, shuffle=False, verbose=0)  # 21 examples: last batch 5 = 3 + 2


def _data(n=21, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g), torch.randn(n, 1, generator=g)


class WithComputeLoss(keras.Model):
    """The guide's first form: compute_loss, every metric of self.metrics, plus its custom test_step."""

    def _update(self, loss, y, y_pred):
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def train_step(self, data):
        x, y = data
        self.zero_grad()
        y_pred = self(x, training=True)
        loss = self.compute_loss(y=y, y_pred=y_pred)
        loss.backward()
        trainable_weights = [v for v in self.trainable_weights]
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            self.optimizer.apply(gradients, trainable_weights)
        return self._update(loss, y, y_pred)

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        return self._update(self.compute_loss(y=y, y_pred=y_pred), y, y_pred)


class WithOwnLossAndTrackers(keras.Model):
    """The guide's lower-level form: compiled with an optimizer only, its own loss_fn and metric trackers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
        self.loss_fn = keras.losses.MeanSquaredError()
        self.steps = keras.metrics.Sum(name="steps")  # a step counter: one per global batch

    def train_step(self, data):
        x, y = data
        self.zero_grad()
        y_pred = self(x, training=True)
        loss = self.loss_fn(y, y_pred)
        loss.backward()
        trainable_weights = [v for v in self.trainable_weights]
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            self.optimizer.apply(gradients, trainable_weights)
        self.loss_tracker.update_state(loss)
        self.mae_metric.update_state(y, y_pred)
        self.steps.update_state(1.0)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result(), "batch_loss": loss,
                "steps": self.steps.result()}

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        self.loss_tracker.update_state(self.loss_fn(y, y_pred))
        self.mae_metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric, self.steps]


def _functional(cls, compile_args):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    model = cls(inputs, keras.layers.Dense(1)(keras.layers.Dense(4, activation="relu")(inputs)))
    model.compile(**compile_args)
    return model


def _floats(logs):
    """Values read now (a metric's result may alias its variable, which later steps and resets change)."""
    return {k: _floats(v) if isinstance(v, dict) else float(v) for k, v in logs.items()}


def _fit_both(build, x, y, **fit):
    batches = ([], [])

    def run(model, seen):
        record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(_floats(logs)))
        history = model.fit(x, y, validation_data=(x[:10], y[:10]), callbacks=[record], **fit).history
        return history, model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)

    reference = build()
    expected = run(reference, batches[0])
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = build()
    got = run(model, batches[1])
    return reference, model, expected, got, batches


def _assert_logs_equal(expected, got):
    assert expected.keys() == got.keys()
    for key in expected:
        torch.testing.assert_close(torch.as_tensor(got[key]), torch.as_tensor(expected[key]), rtol=1e-5, atol=1e-6,
                                   msg=lambda m, k=key: f"{k}: {m}")


def _assert_weights_equal(reference, model):
    for ref, var in zip(reference.weights, model.weights):
        for copy in var._value.values:
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,compile_args", [
    (WithComputeLoss, lambda: dict(optimizer="adam", loss="mse", metrics=["mae"])),
    (WithOwnLossAndTrackers, lambda: dict(optimizer=keras.optimizers.SGD(0.1))),
], ids=["compute_loss", "own_loss_fn_and_trackers"])
def test_custom_train_and_test_step_two_replicas_equal_one_device(cls, compile_args):
    x, y = _data()
    reference, model, (history, evaluated), (got_history, got_evaluated), batches = _fit_both(
        lambda: _functional(cls, compile_args()), x, y, **FIT)
    _assert_weights_equal(reference, model)
    _assert_logs_equal(history, got_history)
    _assert_logs_equal(evaluated, got_evaluated)
    assert len(batches[0]) == len(batches[1]) == 6
    for expected, got in zip(*batches):  # per-batch logs too (the raw batch loss is the global batch's)
        _assert_logs_equal(expected, got)


class GAN(keras.Model):
    """The guide's GAN (two optimizers, each built on its first apply), its noise given with the data."""

    def __init__(self, discriminator, generator):
        super().__init__()
        self.discriminator, self.generator = discriminator, generator
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.built = True

    @property
    def metrics(self):
        return [self.d_loss_tracker, self.g_loss_tracker]

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

    def train_step(self, data):
        real, latent = data
        batch_size = real.shape[0]
        combined = torch.concat([self.generator(latent), real], axis=0)
        labels = torch.concat([torch.ones((batch_size, 1)), torch.zeros((batch_size, 1))], axis=0)
        self.zero_grad()
        d_loss = self.loss_fn(labels, self.discriminator(combined))
        d_loss.backward()
        grads = [v.value.grad for v in self.discriminator.trainable_weights]
        with torch.no_grad():
            self.d_optimizer.apply(grads, self.discriminator.trainable_weights)
        self.zero_grad()
        g_loss = self.loss_fn(torch.zeros((batch_size, 1)), self.discriminator(self.generator(latent)))
        g_loss.backward()
        grads = [v.value.grad for v in self.generator.trainable_weights]
        with torch.no_grad():
            self.g_optimizer.apply(grads, self.generator.trainable_weights)
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}


def _gan():
    keras.utils.set_random_seed(0)
    discriminator = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="relu"),
                                      keras.layers.Dense(1)])
    generator = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh")])
    gan = GAN(discriminator, generator)
    gan.compile(d_optimizer=keras.optimizers.Adam(0.01), g_optimizer=keras.optimizers.Adam(0.01),
                loss_fn=keras.losses.BinaryCrossentropy(from_logits=True))
    return gan


def test_gan_with_two_lazily_built_optimizers_two_replicas_equal_one_device():
    g = torch.Generator().manual_seed(2)
    real, latent = torch.randn(21, 4, generator=g), torch.randn(21, 2, generator=g)
    reference = _gan()
    expected = reference.fit(real, latent, **FIT).history
    with md.distribute.MirroredStrategy(DEVICES).scope():
        gan = _gan()
    got = gan.fit(real, latent, **FIT).history
    _assert_logs_equal(expected, got)
    _assert_weights_equal(reference, gan)
    assert [int(c) for c in gan.d_optimizer.iterations._value.values] == [6, 6]


def test_custom_step_whose_last_batch_leaves_a_replica_empty_is_refused_before_the_first_step():
    x, y = _data(17)  # batches of 8: the last has 1 example for 2 replicas
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _functional(WithComputeLoss, dict(optimizer="sgd", loss="mse"))
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(ValueError, match=r"last batch of 1 example.*17 examples in batches of 8.*2 replicas"):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"last batch of 1 example.*9 examples in batches of 4"):  # test_step
        model.fit(x[:16], y[:16], batch_size=8, validation_data=(x[:9], y[:9]), validation_batch_size=4, verbose=0)
    for w, old in zip(model.weights, before):
        assert (w.numpy() == old).all()


class ScaledPrediction(keras.Model):
    """A model's own predict_step (runs on every replica's slice; outputs gathered in order)."""

    def predict_step(self, data):
        x = data[0] if isinstance(data, tuple) else data
        return {"scaled": 2.0 * self(x, training=False), "first": x[:, :1]}


def test_custom_predict_step_two_replicas_equal_one_device():
    x, _ = _data()
    reference = _functional(ScaledPrediction, dict(optimizer="sgd", loss="mse"))
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _functional(ScaledPrediction, dict(optimizer="sgd", loss="mse"))
    expected, got = reference.predict(x, batch_size=8, verbose=0), model.predict(x, batch_size=8, verbose=0)
    assert expected.keys() == got.keys() == {"scaled", "first"}
    for key in expected:
        torch.testing.assert_close(torch.as_tensor(got[key]), torch.as_tensor(expected[key]))


class WithTorchOptimizer(keras.Model):
    """A train_step stepping a torch.optim optimizer (not the guide's form)."""

    def train_step(self, data):
        x, y = data
        self.torch_optimizer.zero_grad()
        keras.ops.mean(keras.ops.square(self(x, training=True) - y)).backward()
        self.torch_optimizer.step()
        return {}


def test_torch_optimizer_inside_a_custom_train_step_on_replicas_is_refused_before_any_update():
    x, y = _data(16)
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _functional(WithTorchOptimizer, dict(optimizer="sgd"))
        model.torch_optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(NotImplementedError, match=r"torch.optim.SGD.step\(\) inside a Keras model's own train_step"):
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    for w, old in zip(model.weights, before):
        assert (w.numpy() == old).all()
