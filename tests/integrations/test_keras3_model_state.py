"""Keras 3 models whose state multidev's replicas must keep apart or create late, on 2 replicas == one device:
losses added in call() (add_loss, activity regularizers) with the "training with built-in methods" guide's
custom Metric and Loss; subclassed models built on their first call; optimizers built on their first apply."""

from __future__ import annotations

import torch

import multidev as md
from multidev.values.variables import DistributedVariable
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()
ops = keras.ops

DEVICES = ["/cpu:0", "/cpu:1"]
FIT = dict(batch_size=8, epochs=2, shuffle=False, verbose=0)  # 21 examples: last batch 5 = 3 + 2


def _data(n=21, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g), torch.randn(n, 1, generator=g)


def _assert_equal(reference, model, history=None, expected=None):
    assert len(reference.weights) == len(model.weights)
    for ref, var in zip(reference.weights, model.weights):
        assert isinstance(var._value, DistributedVariable), var.path
        for copy in var._value.values:
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6)
    if history is not None:
        assert history.keys() == expected.keys()
        for key in expected:
            torch.testing.assert_close(torch.tensor(history[key]), torch.tensor(expected[key]), rtol=1e-5, atol=1e-6,
                                       msg=lambda m, k=key: f"{k}: {m}")


class MeanActivityPenalty(keras.layers.Layer):
    """The guide's ActivityRegularizationLayer, with a loss that is a mean over the batch."""

    def call(self, inputs):
        self.add_loss(0.1 * ops.mean(ops.square(inputs)))
        return inputs


class CategoricalTruePositives(keras.metrics.Metric):
    """The guide's custom metric (state made with add_variable), on a regression target: |y - y_pred| < 0.5."""

    def __init__(self, name="close_ones", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = ops.cast(ops.abs(y_true - y_pred) < 0.5, "float32")
        if sample_weight is not None:
            values = ops.multiply(values, ops.cast(sample_weight, "float32"))
        self.true_positives.assign_add(ops.sum(values))

    def result(self):
        return self.true_positives

    def reset_state(self):
        self.true_positives.assign(0.0)


class CustomMSE(keras.losses.Loss):
    """The guide's custom loss: MSE plus a penalty pulling predictions towards 0.5."""

    def __init__(self, regularization_factor=0.1, name="custom_mse"):
        super().__init__(name=name)
        self.regularization_factor = regularization_factor

    def call(self, y_true, y_pred):
        mse = ops.mean(ops.square(y_true - y_pred), axis=-1)
        reg = ops.mean(ops.square(0.5 - y_pred), axis=-1)
        return mse + reg * self.regularization_factor


def _guide_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    h = keras.layers.Dense(4, activation="relu", activity_regularizer=keras.regularizers.L2(0.05),
                           kernel_regularizer=keras.regularizers.L2(0.01))(inputs)
    h = MeanActivityPenalty()(h)
    model = keras.Model(inputs, keras.layers.Dense(1)(h))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=CustomMSE(),
                  metrics=[CategoricalTruePositives(), keras.metrics.MeanAbsoluteError()])
    return model


def test_add_loss_activity_regularizer_custom_metric_and_loss_in_fit_two_replicas_equal_one_device():
    x, y = _data()
    reference = _guide_model()
    expected = reference.fit(x, y, validation_data=(x[:10], y[:10]), **FIT).history
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _guide_model()
    history = model.fit(x, y, validation_data=(x[:10], y[:10]), **FIT).history
    _assert_equal(reference, model, history, expected)


class Subclassed(keras.Model):
    """Built lazily: its weights are made on its first call (by fit, or by a first call outside the scope)."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(4, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, x):
        return self.out(self.hidden(x))


def _subclassed():
    keras.utils.set_random_seed(0)
    model = Subclassed()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def test_subclassed_model_built_by_fit_is_distributed_and_equals_one_device():
    x, y = _data()
    reference = _subclassed()
    expected = reference.fit(x, y, **FIT).history
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = _subclassed()
    assert not model.weights  # nothing built yet
    history = model.fit(x, y, **FIT).history
    _assert_equal(reference, model, history, expected)


def _custom_loop(model, optimizer, batches, strategy=None):
    def step(xb, yb):
        model.zero_grad()
        loss = ops.sum(ops.square(model(xb) - yb)) / 8  # summed over the global batch of 8
        loss.backward()
        optimizer.apply([v.value.grad for v in model.trainable_weights], model.trainable_weights)

    for xb, yb in batches:
        if strategy is None:
            step(xb, yb)
        else:
            strategy.run(step, args=(xb, yb))


def test_custom_loop_with_a_lazily_built_model_and_optimizer_equals_one_device():
    x, y = _data(16)
    reference = _subclassed()
    reference(x[:1])
    ref_optimizer = keras.optimizers.Adam(0.05)  # built on its first apply, as Keras does
    _custom_loop(reference, ref_optimizer, [(x[i:i + 8], y[i:i + 8]) for i in (0, 8)])

    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = _subclassed()
        optimizer = keras.optimizers.Adam(0.05)  # not built: Keras builds it inside strategy.run
    model(x[:1])  # first call after the scope: still created in the strategy the model was made in
    dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(8))
    _custom_loop(model, optimizer, dist, strategy)
    _assert_equal(reference, model)
    for ref, var in zip(ref_optimizer.variables, optimizer.variables):  # slots built once, distributed
        assert isinstance(var._value, DistributedVariable), var.path
        for copy in var._value.values:
            torch.testing.assert_close(copy.detach(), ref.value.detach(), rtol=1e-5, atol=1e-6)


def test_seeded_random_draws_and_dropout_masks_differ_across_replicas():
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        seeds = keras.random.SeedGenerator(7)
        dropout = keras.layers.Dropout(0.5, seed=3)
    plain = keras.random.SeedGenerator(7)

    def draw():
        return keras.random.normal((6,), seed=seeds), dropout(torch.ones(1, 64), training=True)

    (noise0, noise1), (mask0, mask1) = [strategy.experimental_local_results(v) for v in strategy.run(draw)]
    assert not torch.equal(noise0, noise1) and not torch.equal(mask0, mask1)  # one device: no two examples alike
    torch.testing.assert_close(noise0, keras.random.normal((6,), seed=plain))  # replica 0 draws as one device
    first, second = seeds.state._value.values
    assert torch.equal(first, second) and torch.equal(first, plain.state.value)  # the state advances alike


class SeededSubclassed(keras.Model):
    """Built lazily, with seeded initializers (the weights do not depend on which thread builds them)."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(4, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(1))
        self.out = keras.layers.Dense(1, kernel_initializer=keras.initializers.GlorotUniform(2))

    def call(self, x):
        return self.out(self.hidden(x))


def test_model_first_called_inside_run_is_built_once_distributed_and_equals_one_device():
    x, y = _data(16)
    reference = SeededSubclassed()
    _custom_loop(reference, keras.optimizers.SGD(0.1), [(x[i:i + 8], y[i:i + 8]) for i in (0, 8)])
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = SeededSubclassed()
        optimizer = keras.optimizers.SGD(0.1)
    dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(8))
    _custom_loop(model, optimizer, dist, strategy)  # the first step builds the model (and the optimizer)
    _assert_equal(reference, model)
