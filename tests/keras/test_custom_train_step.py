"""Custom ``train_step``s as keras.io's "Customizing what happens in fit()" writes them, and a small
ViT, through md.keras on one device and on 2 replicas: same weights and same logged metrics
(issue 29, items 1 and 3).

MirroredStrategy over 2 of the suite's logical CPUs (tests/conftest.py).
"""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers

DEVICES = ["/cpu:0", "/cpu:1"]


def _regression(n=64, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, 6).astype("float32")
    return x, (x[:, :1] * 2 - x[:, 1:2] + 1).astype("float32")


def _fit_both(make, x, y, batch_size=16, epochs=2):
    """Weights and history of ``make()`` fitted on one device and on 2 replicas."""
    out = []
    for strategy in (None, md.distribute.MirroredStrategy(DEVICES)):
        torch.manual_seed(1)
        if strategy is None:
            model = make()
        else:
            with strategy.scope():
                model = make()
        history = model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0).history
        out.append((model.get_weights(), history))
    return out


def _assert_equal_runs(runs, keys, rtol=1e-5):
    (w1, h1), (w2, h2) = runs
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)
    assert sorted(h1) == sorted(h2) == sorted(keys)
    for key in keys:
        np.testing.assert_allclose(h1[key], h2[key], rtol=rtol)


class Net(md.keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = layers.Dense(8, activation="relu")
        self.out = layers.Dense(1)

    def call(self, x):
        return self.out(self.hidden(x))


class TapeStep(Net):
    """keras.io (TensorFlow form): GradientTape, compute_loss, apply, every metric of self.metrics."""

    def train_step(self, data):
        x, y = data
        with md.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


class TorchStep(Net):
    """keras.io (PyTorch form): zero_grad, backward, each variable's value.grad, apply under no_grad."""

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
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


class Keras2Step(Net):
    """tf.keras 2's guide: compiled_loss (it updates the loss tracker) and compiled_metrics."""

    def train_step(self, data):
        x, y = data
        with md.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


class LowerLevel(Net):
    """keras.io "Going lower-level": its own loss object, trackers and ``metrics`` property."""

    def __init__(self):
        super().__init__()
        self.loss_tracker = md.keras.metrics.Mean(name="loss")
        self.mae_metric = md.keras.metrics.MeanAbsoluteError(name="mae")
        self.loss_fn = md.keras.losses.MeanSquaredError()

    def train_step(self, data):
        x, y = data
        with md.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.loss_fn(y, y_pred)
        trainable_vars = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, trainable_vars), trainable_vars))
        self.loss_tracker.update_state(loss)
        self.mae_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric]


@pytest.mark.parametrize("cls", [TapeStep, TorchStep, Keras2Step])
def test_keras_io_custom_train_step_equals_one_device(cls):
    x, y = _regression(70)   # an uneven last batch: 70 = 4 x 16 + 6

    def make():
        model = cls()
        model.compile(md.keras.optimizers.SGD(0.05, momentum=0.9), "mse", metrics=["mae"])
        return model

    _assert_equal_runs(_fit_both(make, x, y), ["loss", "mae"])


class Unlisted(LowerLevel):
    """The same step, its trackers left out of ``metrics`` (never reset), one more log entry."""

    metrics = md.keras.Model.metrics

    def train_step(self, data):
        return {**super().train_step(data), "lr": self.optimizer.learning_rate}


def test_lower_level_custom_step_with_its_own_loss_and_trackers():
    x, y = _regression()

    def make(cls=LowerLevel):
        model = cls()
        model.compile(md.keras.optimizers.Adam(0.01))
        return model

    runs = _fit_both(make, x, y)
    _assert_equal_runs(runs, ["loss", "mae"])
    _assert_equal_runs(_fit_both(lambda: make(Unlisted), x, y), ["loss", "mae", "lr"])
    torch.manual_seed(1)
    reference = Net()      # the built-in step on the same program: the custom one changes nothing
    reference.compile(md.keras.optimizers.Adam(0.01), "mse")
    reference.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(reference.get_weights(), runs[1][0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_weights_value_is_keras_3s_and_tensorflows():
    """``v.value`` is the weight (Keras 3: ``v.value.grad``); calling it reads a snapshot (TF's ``v.value()``)."""
    model = Net()
    model.build((None, 6))
    with md.distribute.MirroredStrategy(DEVICES).scope():
        replicated = Net()
        replicated.build((None, 6))
    for weight in model.trainable_weights + replicated.trainable_weights:
        assert weight.value is weight
    kernel = replicated.trainable_weights[0]
    np.testing.assert_array_equal(kernel.value().numpy(), kernel.numpy())


def test_compute_loss_leaves_the_loss_tracker_to_the_step():
    """As Keras 3: a custom step that never updates the ``loss`` tracker logs 0 for it, and
    ``compile_metrics`` stands for the compiled metrics until they are built."""
    model = Net()
    model.compile("sgd", "mse", metrics=["mae"])
    assert model.metrics_names == ["loss", "compile_metrics"]
    x, y = _regression(8)
    y_pred = model(torch.as_tensor(x))
    model.compute_loss(y=torch.as_tensor(y), y_pred=y_pred)
    assert float(model.metrics[0].result()) == 0.0
    model.metrics[1].update_state(torch.as_tensor(y), y_pred)
    assert model.metrics_names == ["loss", "mae"]
    assert float(model.metrics[1].result()) == pytest.approx(float((y_pred.detach() - torch.as_tensor(y)).abs().mean()))


# ----- a small ViT (keras.io "Image classification with Vision Transformer", shrunk) --------------------------

class PatchEncoder(layers.Layer):
    """Projected patches plus a learned position embedding (a Layer holding layers)."""

    def __init__(self, num_patches, dim):
        super().__init__()
        self.num_patches = num_patches
        self.projection = layers.Dense(dim)
        self.position_embedding = layers.Embedding(num_patches, dim)

    def call(self, patches):
        positions = torch.arange(self.num_patches).unsqueeze(0)
        return self.projection(patches) + self.position_embedding(positions)


def _vit(pixels):
    norm = layers.Normalization()
    norm.adapt(pixels)                       # in the strategy's scope on 2 replicas
    inputs = layers.Input((8, 8, 1))
    patches = layers.Reshape((4, 16))(layers.Conv2D(16, 4, strides=4)(norm(inputs)))
    x = PatchEncoder(4, 16)(patches)
    for _ in range(2):
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        x = layers.Add()([layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h), x])
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        x = layers.Add()([layers.Dense(16)(layers.Dense(32, activation="gelu")(h)), x])
    x = layers.Flatten()(layers.LayerNormalization(epsilon=1e-6)(x))
    model = md.keras.Model(inputs=inputs, outputs=layers.Dense(4)(x))
    # SGD, not Adam: Adam turns the float noise of weights with a zero gradient (the attention's key
    # bias: softmax ignores it) into whole steps, which no tolerance of reassociation covers.
    model.compile(md.keras.optimizers.SGD(0.05, momentum=0.9),
                  md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def test_small_vit_on_two_replicas_equals_one_device():
    rng = np.random.RandomState(0)
    x = (rng.rand(96, 8, 8, 1) * 255).astype("float32")      # raw pixels: Normalization matters
    y = rng.randint(0, 4, 96)
    runs = _fit_both(lambda: _vit(x), x, y, batch_size=32, epochs=3)
    _assert_equal_runs(runs, ["loss", "accuracy"], rtol=2e-4)
    assert runs[0][1]["loss"][-1] < runs[0][1]["loss"][0]


class DecayingStep(Net):
    """A custom step that decays the learning rate itself after each update, in each of Keras's spellings.
    TensorFlow 2.21 (tf.keras and Keras 3, MirroredStrategy over 2 logical CPUs) halves it once a step, as on
    one device (the rate is a mirrored variable aggregated ONLY_FIRST_REPLICA: replica 0's value, once);
    md.keras halved its one host variable once per replica (0.1 * 0.5 ** 8 after 4 steps, weights off)."""

    spelling = "assign"

    def train_step(self, data):
        x, y = data
        with md.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        lr = self.optimizer.learning_rate
        if self.spelling == "assign":
            lr.assign(lr * 0.5)
        elif self.spelling == "assign_sub":
            lr.assign_sub(lr * 0.5)
        else:
            self.optimizer.learning_rate = float(lr) * 0.5
        return {"loss": loss, "lr": self.optimizer.learning_rate * 1.0}


@pytest.mark.parametrize("spelling", ["assign", "assign_sub", "setter"])
def test_learning_rate_decayed_in_the_step_once_per_step_as_tensorflow(spelling):
    x, y = _regression()

    def make():
        model = DecayingStep()
        model.spelling = spelling
        model.compile(md.keras.optimizers.SGD(0.1), "mse")
        return model

    (w1, h1), (w2, h2) = _fit_both(make, x, y, epochs=1)
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert h1["lr"] == h2["lr"] and h2["lr"][-1] == pytest.approx(0.1 * 0.5 ** 4)   # 64 examples, batch 16: 4 steps
    # The raw loss returned under "loss" is the step's value (not the untouched loss tracker's 0.0), reduced as
    # TF 2.21's Keras 3 reduces it: the mean of the replicas' compute_loss, each scaled by 1/2 (2.0847 on one
    # device and 1.0424 on 2 replicas in TensorFlow for the same program)
    np.testing.assert_allclose(h2["loss"], np.asarray(h1["loss"]) / 2, rtol=1e-5)
