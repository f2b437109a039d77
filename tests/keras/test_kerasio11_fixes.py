"""What keras.io's programs p110+ needed of md.keras, through the public API: ``load_model`` of a functional
model whose class subclasses ``keras.Model`` without its own ``__init__`` (keras.io's masked language model:
``MaskedLanguageModel(inputs, mlm_output)`` overriding ``compute_loss``, saved as ``.keras`` and loaded with
``custom_objects``), revived as that class, as Keras 3 revives it."""

from __future__ import annotations

import os

import numpy as np
import pytest

import multidev as md

K = md.keras


class _OwnLoss(K.Model):
    """keras.io's MaskedLanguageModel: no ``__init__``, an overridden ``compute_loss`` (a sum, not a mean)."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        return K.ops.sum(K.losses.mean_squared_error(y, y_pred))


class _OwnInit(K.Model):
    """A subclassed model with its own ``__init__``: still revived by ``cls(**config)``, as Keras 3 does."""

    def __init__(self, units=2, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dense = K.layers.Dense(units)

    def call(self, x):
        return self.dense(x)

    def get_config(self):
        return {"units": self.units, "name": self.name}


def _own_loss_model():
    K.utils.set_random_seed(1)
    inputs = K.Input((3,))
    outputs = K.layers.Dense(2, name="head")(K.layers.Dense(4, activation="relu")(inputs))
    model = _OwnLoss(inputs, outputs, name="own_loss")
    model.compile(optimizer="sgd")
    return model


def test_functional_subclass_loads_as_its_class_with_its_weights(tmp_path):
    model = _own_loss_model()
    x = np.arange(12, dtype="float32").reshape(4, 3) / 10
    path = os.path.join(tmp_path, "own_loss.keras")
    model.save(path)
    loaded = K.models.load_model(path, custom_objects={"_OwnLoss": _OwnLoss})
    assert isinstance(loaded, _OwnLoss) and loaded.name == "own_loss"
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    assert loaded.get_layer("head").output is not None   # a graph: keras.io cuts it at a layer's output
    y = np.zeros((4, 2), "float32")
    loaded.compile(optimizer="sgd")
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(float(np.sum(model.predict(x, verbose=0) ** 2) / 2))


def test_functional_subclass_from_config_twice_gives_two_models():
    model = _own_loss_model()
    first, second = _OwnLoss.from_config(model.get_config()), _OwnLoss.from_config(model.get_config())
    assert isinstance(first, _OwnLoss) and first is not second
    assert [w.shape for w in first.weights] == [w.shape for w in model.weights]


def test_subclass_with_its_own_init_is_still_built_from_its_config():
    revived = _OwnInit.from_config(_OwnInit(units=5, name="mine").get_config())
    assert isinstance(revived, _OwnInit) and revived.units == 5 and revived.name == "mine"


class _WholeGraph(K.Model):
    """keras.io's earlier GAT: ``call`` takes ``[node_states, edges]``, its own ``train_step`` gathers the batch's
    node indices from every node's output (``fit`` gives indices, never the model's inputs)."""

    def __init__(self, node_states, **kwargs):
        super().__init__(**kwargs)
        self.node_states = node_states
        self.dense = K.layers.Dense(3)

    def call(self, inputs):
        node_states, scale = inputs
        return self.dense(node_states) * scale

    def train_step(self, data):
        indices, labels = data
        with md.GradientTape() as tape:
            outputs = self([self.node_states, 1.0])
            loss = self.compiled_loss(labels, K.ops.take(outputs, indices, axis=0))
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}


def _graph_fit(strategy):
    K.utils.set_random_seed(3)
    nodes = np.random.RandomState(0).normal(size=(10, 4)).astype("float32")
    with strategy.scope():
        model = _WholeGraph(K.ops.convert_to_tensor(nodes))
        model.compile(loss=K.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer="sgd")
    return model, model.fit(np.arange(8), np.arange(8) % 3, batch_size=4, epochs=2, verbose=0)


def test_own_train_step_whose_call_takes_other_inputs_builds_in_its_step_on_one_device():
    model, history = _graph_fit(md.distribute.get_strategy())   # it failed: "too many values to unpack"
    assert model.built and len(history.history["loss"]) == 2


def test_on_replicas_it_says_to_build_the_model_before_fit():
    with pytest.raises(ValueError, match=r"_WholeGraph.*Build it in the strategy's scope before fit") as info:
        _graph_fit(md.distribute.MirroredStrategy(["/cpu:0"]))
    assert "too many values to unpack" in str(info.value)   # the call's own error, named


def test_built_before_fit_as_the_error_says_it_trains_on_replicas():
    K.utils.set_random_seed(3)
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    nodes = np.random.RandomState(0).normal(size=(10, 4)).astype("float32")
    with strategy.scope():
        model = _WholeGraph(K.ops.convert_to_tensor(nodes))
        model([model.node_states, 1.0])
        model.compile(loss=K.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer="sgd")
    assert len(model.fit(np.arange(8), np.arange(8) % 3, batch_size=4, epochs=2, verbose=0).history["loss"]) == 2
