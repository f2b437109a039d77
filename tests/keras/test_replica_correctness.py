"""md.keras on 2 replicas trains exactly as on one device where it used to train silently wrong
(issue 29, item 1): frozen layers, subclassed models, Normalization adapted in the scope, custom
``train_step``s in Keras 3's TensorFlow and torch forms, a small ViT.

MirroredStrategy over 2 of the suite's logical CPUs (tests/conftest.py); one device is the same
program without a strategy.
"""

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers

DEVICES = ["/cpu:0", "/cpu:1"]


def _regression(n=64, features=6, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, features).astype("float32")
    return x, (x[:, :1] * 2 - x[:, 1:2] + 1).astype("float32")


def _twice(make, train, replicas=(1, 2)):
    """``{n: train(model)}`` for a model made by ``make()`` on one device and in a 2-replica scope."""
    out = {}
    for n in replicas:
        torch.manual_seed(1)
        if n == 1:
            model = make()
        else:
            with md.distribute.MirroredStrategy(DEVICES).scope():
                model = make()
        out[n] = (model, train(model))
    return out


def _assert_same_weights(a, b, rtol=1e-5, atol=1e-6):
    wa, wb = a.get_weights(), b.get_weights()
    assert len(wa) == len(wb)
    for x, y in zip(wa, wb):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


class MLP(md.keras.Model):
    """A subclassed model: layers made in __init__, weights made by the first call."""

    def __init__(self, hidden=8):
        super().__init__()
        self.hidden = layers.Dense(hidden, activation="relu")
        self.blocks = [layers.Dense(hidden, activation="tanh"), layers.Dense(hidden)]   # a list of layers
        self.out = layers.Dense(1)

    def call(self, x):
        x = self.hidden(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


# ----- trainable = False ------------------------------------------------------------------------------------

def _frozen_sequential(when):
    model = md.keras.Sequential([layers.Input((6,)), layers.Dense(8, activation="relu"), layers.Dense(1)])
    if when == "before":
        model.layers[0].trainable = False
    model.compile(md.keras.optimizers.SGD(0.05), "mse")
    if when == "after":
        model.layers[0].trainable = False
    return model


@pytest.mark.parametrize("when", ["before", "after"])
def test_frozen_layer_does_not_move_on_one_device_or_two_replicas(when):
    x, y = _regression()
    runs = _twice(lambda: _frozen_sequential(when), lambda m: (
        [w.copy() for w in m.layers[0].get_weights()],
        m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]))
    for n, (model, (frozen_before, _)) in runs.items():
        assert len(model.trainable_weights) == 2 and len(model.non_trainable_weights) == 2, n
        for before, after in zip(frozen_before, model.layers[0].get_weights()):
            np.testing.assert_array_equal(before, after)
    _assert_same_weights(runs[1][0], runs[2][0])
    np.testing.assert_allclose(runs[1][1][1], runs[2][1][1], rtol=1e-5)
    kernel = runs[2][0].layers[0]._parameters.get("kernel")   # the variable, not a replica's copy
    assert isinstance(kernel, md.distribute.MirroredVariable)
    assert not any(c.requires_grad for c in kernel.values)   # replicas do not differentiate it either


def test_unfreezing_after_training_trains_the_layer_on_both():
    """Keras 3 refuses variables its optimizer was not built with; md.keras's optimizer adds them."""
    x, y = _regression()

    def train(model):
        model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        frozen = [w.copy() for w in model.layers[0].get_weights()]
        model.layers[0].trainable = True
        model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        return frozen

    runs = _twice(lambda: _frozen_sequential("before"), train)
    for model, frozen in runs.values():
        assert not np.allclose(frozen[0], model.layers[0].get_weights()[0])
    _assert_same_weights(runs[1][0], runs[2][0])


def test_frozen_layer_inside_a_subclassed_models_list():
    x, y = _regression()

    def make():
        model = MLP()
        model.blocks[0].trainable = False
        model.compile(md.keras.optimizers.Adam(0.01), "mse")
        return model

    runs = _twice(make, lambda m: m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0))
    for model, _ in runs.values():
        assert len(model.trainable_weights) == 6
    torch.manual_seed(1)
    fresh = make()
    fresh.build((None, 6))
    np.testing.assert_array_equal(fresh.blocks[0].get_weights()[0], runs[2][0].blocks[0].get_weights()[0])
    _assert_same_weights(runs[1][0], runs[2][0])


def test_frozen_base_model_freezes_its_layers_and_batch_norm_statistics():
    """As Keras: ``base.trainable = False`` sets every inner layer's flag, so BatchNormalization
    runs in inference mode; a model with nothing to train warns and still reports its loss."""
    x, y = _regression()

    def make():
        base = md.keras.Sequential([layers.Input((6,)), layers.Dense(4), layers.BatchNormalization()])
        base.trainable = False
        model = md.keras.Sequential([layers.Input((6,)), base, layers.Dense(1)])
        model.compile(md.keras.optimizers.SGD(0.05), "mse")
        return model

    def train(model):
        base = model.layers[0]
        before = base.get_weights()
        history = model.fit(x * 3 + 2, y, batch_size=16, epochs=1, shuffle=False, verbose=0).history["loss"]
        return before, history

    runs = _twice(make, train)
    for model, (before, _) in runs.values():
        assert [layer.trainable for layer in model.layers[0].layers] == [False, False]
        for a, b in zip(before, model.layers[0].get_weights()):   # kernel, bias, BN weights and statistics
            np.testing.assert_array_equal(a, b)
    _assert_same_weights(runs[1][0], runs[2][0])
    np.testing.assert_allclose(runs[1][1][1], runs[2][1][1], rtol=1e-5)
    for model, _ in runs.values():
        model.trainable = False
        with pytest.warns(UserWarning, match="does not have any trainable weights"):
            assert model.fit(x, y, batch_size=16, epochs=1, verbose=0).history["loss"][0] > 0


# ----- subclassed models ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_subclassed_model_on_two_replicas_equals_one_device(optimizer):
    x, y = _regression(70)   # batches of 32: an uneven last batch of 6

    def make():
        model = MLP()
        opt = md.keras.optimizers.SGD(0.05, momentum=0.9) if optimizer == "sgd" else md.keras.optimizers.Adam(0.01)
        model.compile(opt, "mse", metrics=["mae"])
        return model

    runs = _twice(make, lambda m: m.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0).history)
    (one, h1), (two, h2) = runs[1], runs[2]
    assert all(isinstance(w, md.distribute.MirroredVariable) for w in two.trainable_variables)
    _assert_same_weights(one, two)
    for key in ("loss", "mae"):
        np.testing.assert_allclose(h1[key], h2[key], rtol=1e-5)
    assert int(two.optimizer.iterations) == int(one.optimizer.iterations) == 6


def test_first_call_outside_the_scope_builds_in_the_models_strategy():
    """A subclassed model made in the scope and first called outside it (a sample prediction) gets
    distributed weights; a layer made and built outside the scope is refused before the first step."""
    x, y = _regression()

    def make():
        model = MLP()
        model.compile(md.keras.optimizers.SGD(0.05), "mse")
        return model

    def train(model):
        model(x[:2])                      # outside any scope
        return model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0).history["loss"]

    runs = _twice(make, train)
    assert all(isinstance(w, md.distribute.MirroredVariable) for w in runs[2][0].weights)
    _assert_same_weights(runs[1][0], runs[2][0])
    outside = layers.Dense(1)
    outside.build((None, 6))
    with md.distribute.MirroredStrategy(DEVICES).scope():
        model = md.keras.Sequential([layers.Input((6,)), outside])
        model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="was not created in the distribution strategy scope"):
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    np.testing.assert_array_equal(model.get_weights()[0], outside.get_weights()[0])


def test_trainable_variables_inside_a_replica_are_the_variables():
    """Inside strategy.run the weights API lists the distributed variables, as Keras does."""
    strategy = md.distribute.MirroredStrategy(DEVICES)
    with strategy.scope():
        model = MLP()
        model.build((None, 6))
    seen = strategy.run(lambda: [id(v) for v in model.trainable_variables])
    for ids in strategy.experimental_local_results(seen):
        assert ids == [id(v) for v in model.trainable_variables]


# ----- Normalization.adapt in the scope -----------------------------------------------------------------------

def test_normalization_adapted_in_the_scope_is_adapted_on_every_replica():
    rng = np.random.RandomState(0)
    x = (rng.randn(64, 3) * 5 + 3).astype("float32")
    y = (x[:, :1] > 3).astype("float32")

    def make():
        norm = layers.Normalization()
        norm.adapt(x)
        model = md.keras.Sequential([layers.Input((3,)), norm, layers.Dense(1, activation="sigmoid")])
        model.compile(md.keras.optimizers.SGD(0.5), "binary_crossentropy")
        return model

    runs = _twice(make, lambda m: m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"])
    mean = runs[2][0].layers[0]._buffers.get("mean")
    for copy in mean.values:
        np.testing.assert_allclose(copy.numpy(), x.mean(0), rtol=1e-5)
    _assert_same_weights(runs[1][0], runs[2][0])
    np.testing.assert_allclose(runs[1][1], runs[2][1], rtol=1e-5)
    with md.distribute.MirroredStrategy(DEVICES).scope():
        given = layers.Normalization(mean=[1.0, 2.0, 3.0], variance=[4.0, 4.0, 4.0])
        given.build((None, 3))
    for copy in given._buffers.get("mean").values:
        np.testing.assert_array_equal(copy.numpy(), [1.0, 2.0, 3.0])


def test_set_and_load_weights_in_the_scope_reach_every_replica(tmp_path):
    def make():
        return md.keras.Sequential([layers.Input((3,)), layers.BatchNormalization(), layers.Dense(1)])

    values = [np.full(3, v, "float32") for v in (2.0, 3.0, 4.0, 5.0)]
    source = make()
    source.layers[0].set_weights(values)
    path = str(tmp_path / "bn.weights.h5")
    source.save_weights(path)
    with md.distribute.MirroredStrategy(DEVICES).scope():
        loaded, assigned = make(), make()
    loaded.load_weights(path)
    assigned.layers[0].set_weights(values)
    for model in (loaded, assigned):
        bn = model.layers[0]
        for name, want in zip(("gamma", "beta", "moving_mean", "moving_variance"), values):
            variable = bn._parameters.get(name, bn._buffers.get(name))   # the variable, not a copy
            for copy in variable.values:
                np.testing.assert_array_equal(copy.detach().numpy(), want)
